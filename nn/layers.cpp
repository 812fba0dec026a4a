#include "linea/nn/layers.h"

#include <cmath>

#include "linea/autograd/ops_matmul.h"
#include "linea/nn/init.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

// ---- Linear ----

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Module("Linear"), in_(in_features), out_(out_features) {
  LINEA_CHECK(in_features > 0 && out_features > 0, "[Linear] in_features {} and out_features {} must be positive",
              in_features, out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", uniform_(empty({out_features, in_features}), -bound, bound));
  if (bias) this->bias = register_parameter("bias", uniform_(empty({out_features}), -bound, bound));
}

Tensor Linear::forward(const Tensor& x) {
  LINEA_CHECK(x.dim() >= 1 && x.size(-1) == in_, "[Linear] expected input [..., {}], got {}", in_,
              shape_str(x.shape()));
  // weight.t() is a view: the gemm reads W transposed in place, and adds the bias itself.
  return linear(x, weight, bias);
}

// ---- Dropout ----

Dropout::Dropout(double p) : Dropout(p, default_generator().next_u64()) {}

Dropout::Dropout(double p, uint64_t seed) : Dropout("Dropout", p, seed) {}

Dropout::Dropout(std::string type_name, double p, uint64_t seed)
    : Module(std::move(type_name)), p_(p), seed_(seed) {
  LINEA_CHECK(p >= 0 && p <= 1, "[{}] p must be in [0, 1], got {}", this->type_name(), p);
}

Tensor Dropout::apply_mask(const Tensor& x, Shape shape) {
  if (p_ == 1) return x * 0.0;
  // u drawn on x's device from the layer's stream, then keep = (u >= p) as x's dtype, pre-scaled
  // by 1/(1-p): one multiply, whose backward is g * keep.
  Tensor u = empty(std::move(shape), x.dtype(), x.device());
  backend(x.device()).random_uniform(u, seed_, offset_);
  offset_ += static_cast<uint64_t>(u.numel());
  Tensor keep = ge(u, scalar(p_, Options(x.dtype(), x.device()))).to(x.dtype()) * (1.0 / (1.0 - p_));
  return x * keep;
}

Tensor Dropout::forward(const Tensor& x) { return active() ? apply_mask(x, x.shape()) : x; }

Dropout2d::Dropout2d(double p) : Dropout2d(p, default_generator().next_u64()) {}

Dropout2d::Dropout2d(double p, uint64_t seed) : Dropout("Dropout2d", p, seed) {}

Tensor Dropout2d::forward(const Tensor& x) {
  LINEA_CHECK(x.dim() == 3 || x.dim() == 4, "[Dropout2d] expected input [N, C, H, W] or [N, C, L], got {}",
              shape_str(x.shape()));
  if (!active()) return x;
  Shape channels(x.dim(), 1);  // [N, C, 1, 1]: one draw per channel, broadcast over the plane
  channels[0] = x.size(0);
  channels[1] = x.size(1);
  return apply_mask(x, channels);
}

// ---- Sequential ----

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Sequential() {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(m)));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : modules_) y = m->forward(y);
  return y;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  LINEA_CHECK(i < modules_.size(), "[Sequential] index {} out of range for {} modules", i, modules_.size());
  return modules_[i];
}

// ---- MLP ----

MLP::MLP(int64_t in_features, int64_t hidden_features, int64_t out_features, std::shared_ptr<Module> act,
         double dropout)
    : Module("MLP") {
  fc1 = register_module("fc1", std::make_shared<Linear>(in_features, hidden_features));
  this->act = register_module("act", act ? std::move(act) : std::make_shared<GELU>());
  drop = register_module("drop", std::make_shared<Dropout>(dropout));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden_features, out_features ? out_features : in_features));
}

Tensor MLP::forward(const Tensor& x) {
  Tensor h = drop->forward(act->forward(fc1->forward(x)));
  return drop->forward(fc2->forward(h));
}

Tensor MLP::forward_add(const Tensor& x, const Tensor& residual) {
  if (drop->active()) return residual + forward(x);
  return linear_add(act->forward(fc1->forward(x)), fc2->weight, fc2->bias, residual);
}

}  // namespace linea::nn
