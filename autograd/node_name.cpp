// Node::name(): PyTorch's name for the node of each built-in op, so that grad_fn()->name() reads
// as in libtorch ("AddBackward0"). PyTorch numbers the overloads of an op (add(Tensor, Tensor) is
// AddBackward0, add(Tensor, Scalar) AddBackward1); linea has one node per op and takes the first
// number, except where the node itself tells the overloads apart (pow, matmul's ranks).
#include <map>
#include <string>

#include "linea/autograd/graph.h"

namespace linea::autograd {

namespace {

// linea's op -> PyTorch's node, for every op that records a node under its own name.
const std::map<std::string, std::string, std::less<>>& table() {
  static const std::map<std::string, std::string, std::less<>> names = {
      // elementwise (autograd/ops_elementwise.cpp)
      {"neg", "NegBackward0"}, {"exp", "ExpBackward0"}, {"log", "LogBackward0"}, {"sqrt", "SqrtBackward0"},
      {"rsqrt", "RsqrtBackward0"}, {"tanh", "TanhBackward0"}, {"sin", "SinBackward0"}, {"cos", "CosBackward0"},
      {"sigmoid", "SigmoidBackward0"}, {"relu", "ReluBackward0"}, {"gelu", "GeluBackward0"},
      {"silu", "SiluBackward0"}, {"softplus", "SoftplusBackward0"}, {"abs", "AbsBackward0"},
      {"clamp", "ClampBackward1"}, {"add", "AddBackward0"}, {"sub", "SubBackward0"}, {"mul", "MulBackward0"},
      {"div", "DivBackward0"}, {"maximum", "MaximumBackward0"}, {"minimum", "MinimumBackward0"},
      {"where", "WhereBackward0"},
      // reductions (autograd/ops_reduce.cpp); the all-dims max/min are PyTorch's second overload
      {"sum", "SumBackward0"}, {"var", "VarBackward0"}, {"max", "MaxBackward1"}, {"min", "MinBackward1"},
      {"logsumexp", "LogsumexpBackward0"}, {"softmax", "SoftmaxBackward0"}, {"log_softmax", "LogSoftmaxBackward0"},
      // products and norms (ops_matmul.cpp, ops_norm.cpp)
      {"linear", "AddmmBackward0"}, {"linear_add", "AddmmBackward0"}, {"layer_norm", "NativeLayerNormBackward0"},
      {"rms_norm", "RmsNormBackward0"},
      // joins and indexing (ops_index.cpp)
      {"cat", "CatBackward0"}, {"index_select", "IndexSelectBackward0"}, {"gather", "GatherBackward0"},
      {"scatter_add", "ScatterAddBackward0"}, {"embedding", "EmbeddingBackward0"},
      // views and copies (tensor_methods.cpp)
      {"view", "ViewBackward0"}, {"reshape", "ViewBackward0"}, {"unsqueeze", "UnsqueezeBackward0"},
      {"squeeze", "SqueezeBackward0"}, {"permute", "PermuteBackward0"}, {"expand", "ExpandBackward0"},
      {"slice", "SliceBackward0"}, {"select", "SelectBackward0"}, {"contiguous", "CloneBackward0"},
      {"clone", "CloneBackward0"}, {"to", "ToCopyBackward0"},
      // losses (nn/loss.cpp)
      {"cross_entropy", "NllLossBackward0"}, {"binary_cross_entropy", "BinaryCrossEntropyBackward0"},
  };
  return names;
}

}  // namespace

std::string Node::name() const {
  if (op == "pow") return input_shapes.size() == 1 ? "PowBackward0" : "PowBackward1";  // scalar / tensor exponent
  if (op == "matmul" && input_shapes.size() == 2) {
    const size_t ra = input_shapes[0].size(), rb = input_shapes[1].size();
    if (ra == 2 && rb == 2) return "MmBackward0";
    if (ra == 2 && rb == 1) return "MvBackward0";
    if (ra == 1 && rb == 1) return "DotBackward0";
    if (ra == 3 && rb == 3 && input_shapes[0][0] == input_shapes[1][0]) return "BmmBackward0";
    return "MatmulBackward0";
  }
  const auto& names = table();
  auto it = names.find(op);
  return it == names.end() ? op : it->second;  // custom functions keep the name they were given
}

}  // namespace linea::autograd
