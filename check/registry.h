// The registry of ops: every public op of autograd/ops_*.h, the norms, the losses and the
// attention functions (MHLA's fused and composite forms included), each as one OpCase. The
// `linea-check` program (check/main.cpp), the CPU op gradcheck (ctest `check_gradcheck`) and the
// GPU tests (tests/test_gpu_ops.cpp, tests/test_gpu_autograd.cpp) all run this one table, so
// adding an op to linea means adding its cases here (see docs/testing.md, "Adding an op").
//
// A case's inputs are N(0, 1) floating tensors, one per Input, made from the case's own seed on
// the CPU in the dtype under test and copied to the device, so every device sees the same
// numbers. An Input may be a non-contiguous leaf (transposed or strided) and may not require
// grad. Anything else f needs (indices, masks, positive values, large values) it builds from its
// inputs on their device.
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <linea/linea.h>

namespace linea::check {

// How an input leaf is laid out in memory.
enum class Layout {
  Contiguous,
  Transposed,  // the last two dims swapped: a t() view of a contiguous [.., n, m] tensor
  Strided,     // every other element of the last dim of a twice-as-wide tensor
};

struct Input {
  Shape shape;
  Layout layout = Layout::Contiguous;
  bool requires_grad = true;  // false: a constant operand (its gradient must not be needed)
  Input(std::initializer_list<int64_t> s) : shape(s) {}
  Input(Shape s, Layout l, bool g) : shape(std::move(s)), layout(l), requires_grad(g) {}
};
inline Input transposed(Shape s) { return {std::move(s), Layout::Transposed, true}; }
inline Input strided(Shape s) { return {std::move(s), Layout::Strided, true}; }
inline Input constant(Shape s) { return {std::move(s), Layout::Contiguous, false}; }

// Tolerances of a device-vs-CPU comparison (|device - cpu| <= atol + rtol |cpu|). Float32:
// elementwise kernels round once per element, so they match the CPU to a few ulps; reductions and
// products sum in another order. Float64 results agree to 1e-10 everywhere.
enum class Tol { Elementwise, Reduction };
double compare_atol(Tol t, DType dtype);
double compare_rtol(Tol t, DType dtype);

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpCase {
  std::string name;  // unique; `--op NAME` selects the case NAME and every case named "NAME ..."
  std::vector<Input> inputs;
  OpFn f;
  Tol tol = Tol::Elementwise;
  bool differentiable = true;  // false: integer/bool outputs, or no gradient path
  // The float64 gradcheck's tolerances (GradcheckOptions' defaults unless an op needs more room).
  double gc_atol = 1e-6, gc_rtol = 1e-4;
  // Inputs that reach the output only through a comparison or a cast to an integer, where a NaN
  // rightly vanishes (where's condition: NaN > 0 is false, as in PyTorch). The NaN check skips them.
  std::vector<size_t> nan_stops = {};
};

// c with inputs `which` marked as OpCase::nan_stops.
inline OpCase nan_stops_at(std::vector<size_t> which, OpCase c) {
  c.nan_stops = std::move(which);
  return c;
}

// Every registered case, in a fixed order (seeds depend on the position).
const std::vector<OpCase>& registry();

// The case named `prefix` and those named "prefix ..." ("all" selects every case, "" none).
std::vector<const OpCase*> select_cases(const std::string& prefix);

// One element of one input set to `value` (the NaN check's probes); `element` is row-major in the
// input's logical shape, whatever its layout.
struct Poke {
  size_t input;
  int64_t element;
  double value;
};

// A case's inputs on `device`, in `dtype`, from `seed`; they require grad when `grad` is set,
// the case is differentiable and the Input asks for it. With a poke, that element is replaced.
std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed, bool grad,
                                const Poke* poke = nullptr);

// The seed of case number `i` of the registry: the same inputs in every command and test.
inline uint64_t case_seed(size_t i) { return 1000 + 7 * i; }

// The registry's parts, one per family (check/ops_*.cpp).
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> reduce_cases();
std::vector<OpCase> shape_cases();  // views, copies, joins, indexing, dtype conversions
std::vector<OpCase> nn_cases();     // matmul, norms, losses, attention

}  // namespace linea::check
