// CudaBackend::unary, binary, where: the checks of the CPU backend (tensor/cpu/cpu_elementwise.cpp),
// then the launchers of elementwise.cu.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_elementwise.h"

namespace linea::cuda {

#define LINEA_U(name) static_cast<int>(UnaryOp::name) == static_cast<int>(UOp::name)
static_assert(LINEA_U(Neg) && LINEA_U(Exp) && LINEA_U(Log) && LINEA_U(Sqrt) && LINEA_U(Rsqrt) && LINEA_U(Tanh) &&
                  LINEA_U(Sigmoid) && LINEA_U(Relu) && LINEA_U(GeluTanh) && LINEA_U(GeluErf) && LINEA_U(Silu) &&
                  LINEA_U(Abs) && LINEA_U(Sign) && LINEA_U(PowScalar) && LINEA_U(Clamp) && LINEA_U(ReluGrad) &&
                  LINEA_U(GeluTanhGrad) && LINEA_U(GeluErfGrad) && LINEA_U(SiluGrad) && LINEA_U(ClampMask),
              "launch_elementwise.h's UOp must list linea::UnaryOp's values in order");
#undef LINEA_U
#define LINEA_B(name) static_cast<int>(BinaryOp::name) == static_cast<int>(BOp::name)
static_assert(LINEA_B(Add) && LINEA_B(Sub) && LINEA_B(Mul) && LINEA_B(Div) && LINEA_B(Pow) && LINEA_B(Maximum) &&
                  LINEA_B(Minimum) && LINEA_B(Eq) && LINEA_B(Ne) && LINEA_B(Lt) && LINEA_B(Le) && LINEA_B(Gt) &&
                  LINEA_B(Ge),
              "launch_elementwise.h's BOp must list linea::BinaryOp's values in order");
#undef LINEA_B

namespace {

const char* unary_name(UnaryOp op) {
  static constexpr const char* names[] = {
      "neg",  "exp",  "log",       "sqrt",           "rsqrt",         "tanh",      "sigmoid",
      "relu", "gelu", "gelu",      "silu",           "abs",           "sign",      "pow",
      "clamp", "relu_grad", "gelu_tanh_grad", "gelu_erf_grad", "silu_grad", "clamp_mask"};
  return names[static_cast<int>(op)];
}

const char* binary_name(BinaryOp op) {
  static constexpr const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                          "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  return names[static_cast<int>(op)];
}

void check_out(const char* op, const Tensor& out, const Tensor& in) {
  LINEA_CHECK(out.is_contiguous() && out.shape() == in.shape(),
              "[{}] internal: out (shape {}) must be contiguous and shaped like the input {}", op,
              shape_str(out.shape()), shape_str(in.shape()));
}

}  // namespace

void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  const char* name = unary_name(op);
  check_out(name, out, x);
  LINEA_CHECK(out.dtype() == x.dtype(), "[{}] internal: out dtype {} differs from input dtype {}", name, out.dtype(),
              x.dtype());
  if (!launch_unary(static_cast<UOp>(op), arg(x, name), arg(out, name), p0, p1)) {
    LINEA_CHECK(x.dtype() != DType::Bool, "[{}] not defined for bool tensors", name);
    throw Error(fmt::format("[{}] expected a floating dtype (float32 or float64), got {}", name, x.dtype()));
  }
  check_launch("elementwise unary");
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = binary_name(op);
  check_out(name, out, a);
  check_out(name, out, b);
  const bool compare = op >= BinaryOp::Eq;
  LINEA_CHECK(a.dtype() == b.dtype() && out.dtype() == (compare ? DType::Bool : a.dtype()),
              "[{}] internal: dtypes {}, {} -> {} do not match", name, a.dtype(), b.dtype(), out.dtype());
  if (!launch_binary(static_cast<BOp>(op), arg(a, name), arg(b, name), arg(out, name)))
    throw Error(fmt::format("[{}] not supported for dtype {}{}", name, a.dtype(),
                            a.dtype() == DType::Bool ? "" : " (needs float32 or float64)"));
  check_launch("elementwise binary");
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_out("where", out, cond);
  check_out("where", out, a);
  check_out("where", out, b);
  LINEA_CHECK(cond.dtype() == DType::Bool && a.dtype() == out.dtype() && b.dtype() == out.dtype(),
              "[where] internal: dtypes cond {}, a {}, b {} -> {} do not match", cond.dtype(), a.dtype(), b.dtype(),
              out.dtype());
  launch_where(arg(cond, "where"), arg(a, "where"), arg(b, "where"), arg(out, "where"));
  check_launch("elementwise where");
}

}  // namespace linea::cuda
