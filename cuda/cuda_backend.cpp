// The CUDA backend object, its stream, and the helpers every cuda/*.cpp file uses to hand tensors
// to kernels and to turn CUDA errors into linea::Errors.
#include <initializer_list>
#include <utility>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_elementwise.h"
#include "linea/cuda/launch_reduce.h"

namespace linea::cuda {

// device_abi.h and the launch headers mirror linea's enums (nvcc cannot include the originals),
// and the .cpp files cast one to the other; each mirror must list the same values in order.
template <class A, class B>
constexpr bool mirrors(std::initializer_list<std::pair<A, B>> pairs) {
  for (auto [a, b] : pairs)
    if (static_cast<int>(a) != static_cast<int>(b)) return false;
  return true;
}

static_assert(mirrors<DType, Dt>({{DType::Float32, Dt::F32}, {DType::Float64, Dt::F64}, {DType::Int64, Dt::I64},
                                  {DType::Bool, Dt::Bool}, {DType::UInt8, Dt::U8}}),
              "device_abi.h's Dt must list the dtypes in linea::DType's order");
static_assert(mirrors<ReduceOp, Red>({{ReduceOp::Sum, Red::Sum}, {ReduceOp::Max, Red::Max}, {ReduceOp::Min, Red::Min},
                                      {ReduceOp::ArgMax, Red::ArgMax}, {ReduceOp::LogSumExp, Red::LogSumExp}}),
              "launch_reduce.h's Red must list the ops in linea::ReduceOp's order");
static_assert(mirrors<UnaryOp, UOp>({{UnaryOp::Neg, UOp::Neg}, {UnaryOp::Exp, UOp::Exp}, {UnaryOp::Log, UOp::Log},
                                     {UnaryOp::Sqrt, UOp::Sqrt}, {UnaryOp::Rsqrt, UOp::Rsqrt},
                                     {UnaryOp::Tanh, UOp::Tanh}, {UnaryOp::Sigmoid, UOp::Sigmoid},
                                     {UnaryOp::Relu, UOp::Relu}, {UnaryOp::GeluTanh, UOp::GeluTanh},
                                     {UnaryOp::GeluErf, UOp::GeluErf}, {UnaryOp::Silu, UOp::Silu},
                                     {UnaryOp::Abs, UOp::Abs}, {UnaryOp::Sign, UOp::Sign},
                                     {UnaryOp::PowScalar, UOp::PowScalar}, {UnaryOp::Clamp, UOp::Clamp},
                                     {UnaryOp::ReluGrad, UOp::ReluGrad}, {UnaryOp::GeluTanhGrad, UOp::GeluTanhGrad},
                                     {UnaryOp::GeluErfGrad, UOp::GeluErfGrad}, {UnaryOp::SiluGrad, UOp::SiluGrad},
                                     {UnaryOp::ClampMask, UOp::ClampMask}}),
              "launch_elementwise.h's UOp must list linea::UnaryOp's values in order");
static_assert(mirrors<BinaryOp, BOp>({{BinaryOp::Add, BOp::Add}, {BinaryOp::Sub, BOp::Sub}, {BinaryOp::Mul, BOp::Mul},
                                      {BinaryOp::Div, BOp::Div}, {BinaryOp::Pow, BOp::Pow},
                                      {BinaryOp::Maximum, BOp::Maximum}, {BinaryOp::Minimum, BOp::Minimum},
                                      {BinaryOp::Eq, BOp::Eq}, {BinaryOp::Ne, BOp::Ne}, {BinaryOp::Lt, BOp::Lt},
                                      {BinaryOp::Le, BOp::Le}, {BinaryOp::Gt, BOp::Gt}, {BinaryOp::Ge, BOp::Ge}}),
              "launch_elementwise.h's BOp must list linea::BinaryOp's values in order");

CudaBackend& instance() {
  static CudaBackend b;
  return b;
}

cudaStream_t stream() {
  // One non-blocking stream for all of linea's work: kernels, copies and the allocator's reuse
  // are then ordered by the stream alone, and nothing waits on the legacy default stream.
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    LINEA_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return s;
}

Dt dt(DType t) { return static_cast<Dt>(static_cast<int>(t)); }

TensorArg arg(const Tensor& t, const char* op) {
  LINEA_CHECK(t.device().is_cuda(), "[{}] expected a CUDA tensor, got one on {}", op, t.device());
  LINEA_CHECK(t.dim() <= kMaxDims, "[{}] CUDA kernels take at most {} dims, got shape {}", op, kMaxDims,
              shape_str(t.shape()));
  TensorArg a;
  a.data = t.data_ptr();
  a.dtype = dt(t.dtype());
  a.ndim = static_cast<int>(t.dim());
  for (int i = 0; i < a.ndim; ++i) {
    a.shape[i] = t.shape()[i];
    a.strides[i] = t.strides()[i];
  }
  return a;
}

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(fmt::format("[cuda] {} failed: {} ({}) at {}:{}", what, cudaGetErrorString(err), cudaGetErrorName(err),
                          file, line));
}

void check_launch(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(fmt::format("[cuda] kernel {} failed to launch: {} ({})", kernel, cudaGetErrorString(err),
                            cudaGetErrorName(err)));
}

}  // namespace linea::cuda
