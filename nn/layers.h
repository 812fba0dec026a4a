// The basic layers: Linear, Dropout, the activations, Functional, Sequential, MLP. Norms are in nn/norm.h, embeddings
// (token, positional, rotary, image patches) in nn/embedding.h.
//
// Like PyTorch's C++ frontend, layers are held by std::shared_ptr and expose their parameters as
// public members (`linear->weight`). Parameters are float32; to build a model in float64 (for
// gradchecks), build it and call nn::to(model, DType::Float64) (nn/init.h).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "linea/autograd/ops_elementwise.h"
#include "linea/nn/module.h"
#include "linea/tensor/random.h"

namespace linea::nn {

// y = x Wᵀ + b over the last dim of x (any leading dims). W: [out, in], b: [out]. Both start as
// U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default, from the global generator.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  Tensor weight;
  Tensor bias;  // undefined when built without bias

 private:
  int64_t in_, out_;
};

// Zeroes each element with probability p in training mode and scales the rest by 1/(1-p), so the
// expectation is unchanged; the identity in eval mode. The mask comes from a counter-based random
// stream (Backend::random_uniform): element i of a call reads number offset + i of the stream of
// the layer's seed, and each call advances offset by the input's size. So the mask is the same on
// every device, a layer's masks do not depend on what other code draws, and (seed, offset) is
// the layer's whole random state: store it beside a checkpoint and set_rng_state() resumes the
// very same masks. The seed comes from the global generator at construction (or from `seed`).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Dropout(double p, uint64_t seed);
  Tensor forward(const Tensor& x) override;
  void manual_seed(uint64_t seed) { set_rng_state(seed, 0); }
  void set_rng_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }  // numbers of the stream used so far
  double p() const { return p_; }
  bool active() const { return is_training() && p_ > 0; }  // false: forward is the identity

 protected:
  Dropout(std::string type_name, double p, uint64_t seed);
  // x times the mask of `shape` (x's shape, or a shape it broadcasts from): numbers drawn from the
  // stream, kept (>= p) as 1/(1-p), dropped as 0; the offset advances by the mask's size.
  Tensor apply_mask(const Tensor& x, Shape shape);

 private:
  double p_;
  uint64_t seed_, offset_ = 0;
};

// Dropout of whole channels: in training mode each [H, W] plane of x [N, C, H, W] (or each [L] row
// of [N, C, L]) is zeroed with probability p and the rest scaled by 1/(1-p); one stream number per
// (n, c), from the same counter-based stream and with the same state as Dropout.
class Dropout2d : public Dropout {
 public:
  explicit Dropout2d(double p = 0.5);
  Dropout2d(double p, uint64_t seed);
  Tensor forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  explicit GELU(GeluApprox approx = GeluApprox::Erf) : Module("GELU"), approx_(approx) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approx_); }

 private:
  GeluApprox approx_;
};

// The other activations as modules (for Sequential), as libtorch names them; each forward is the
// free function (autograd/ops_elementwise.h).
class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override { return relu(x); }
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override { return tanh(x); }
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override { return silu(x); }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : Module("LeakyReLU"), slope_(negative_slope) {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, slope_); }

 private:
  double slope_;
};

// A function as a module, as libtorch's nn::Functional: Functional(relu), or with arguments bound
// after the input, Functional(leaky_relu, 0.2) (forward(x) is leaky_relu(x, 0.2)).
class Functional : public Module {
 public:
  template <class F, class... Args>
  explicit Functional(F f, Args... args)
      : Module("Functional"),
        f_([f = std::move(f), ... args = std::move(args)](const Tensor& x) { return f(x, args...); }) {}
  Tensor forward(const Tensor& x) override { return f_(x); }

 private:
  std::function<Tensor(const Tensor&)> f_;
};

// Children named "0", "1", ...; forward feeds each one's output to the next.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// fc1 -> act -> dropout -> fc2 -> dropout (timm's Mlp). out_features = 0 means in_features;
// act defaults to GELU (erf).
class MLP : public Module {
 public:
  MLP(int64_t in_features, int64_t hidden_features, int64_t out_features = 0, std::shared_ptr<Module> act = nullptr,
      double dropout = 0);
  Tensor forward(const Tensor& x) override;
  // residual + forward(x), the add done by fc2's gemm (linear_add) unless dropout is active.
  Tensor forward_add(const Tensor& x, const Tensor& residual);

  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Module> act;
  std::shared_ptr<Dropout> drop;
};

}  // namespace linea::nn
