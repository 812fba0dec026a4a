// Optimizers and what a training step calls around them: LR schedules and grad-norm clipping.
// Options are aggregates for designated initialisers (nn::SGD(params, {.lr = 0.1, .momentum = 0.9}));
// nn/optim_options.h has libtorch's chainable spelling (optim::SGDOptions(0.1).momentum(0.9)).
//
// An optimizer holds parameter groups (each with its own lr and weight decay) and per-parameter
// state (update count, momentum or Adam moments) keyed by the parameter's NAME, so the state can
// be saved in a checkpoint and loaded into a fresh optimizer of a rebuilt model. step() updates
// every parameter that has a .grad in place, all of a device's parameters in one fused backend
// call (Backend::adamw_step / sgd_step: one kernel launch over all of them on the GPU), then
// applies the projection of every updated parameter that has one (set_projection below).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "linea/nn/module.h"

namespace linea::nn {

using NamedParams = std::vector<std::pair<std::string, Tensor>>;

// Unnamed parameters (module.parameters(), a list of leaves) take their index as their name:
// "0", "1", ..., the keys PyTorch's optimizer state_dict uses.
NamedParams numbered(const std::vector<Tensor>& params);

// Projected gradient descent: a parameter constrained to a set (MHLA's mixing matrix to [0, 1])
// gets a projection, which every optimizer applies to it in place right after each update, so no
// training loop has to remember it. Registered by the parameter's owner (MHLA's constructor); it
// lives as long as the parameter does. Setting an empty projection removes it.
using Projection = std::function<void(const Tensor& param)>;
void set_projection(const Tensor& param, Projection projection);

// Parameters sharing hyperparameters; unset values take the optimizer's options.
struct ParamGroup {
  NamedParams params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step();       // updates every parameter that has a gradient, then projects it (set_projection)
  void zero_grad();  // drops the gradients (the next backward starts from nothing)
  void set_lr(double lr);  // for every group; what an LR schedule calls before step()
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  std::vector<ParamGroup>& param_groups() { return groups_; }

  // Keys: "<param>.step" (int64 0-d), "<param>.<buffer>" (shaped like the parameter) for every
  // parameter updated at least once, and "param_groups.<i>.lr" / ".weight_decay" (float64 0-d).
  StateDict state_dict() const;
  // Checks everything first (unknown parameter, missing buffer, wrong shape/dtype, group count)
  // and lists all problems in one error; changes nothing unless every entry fits.
  void load_state_dict(const StateDict& state);

 protected:
  struct State {
    int64_t step = 0;             // updates applied to this parameter, this one included
    std::vector<Tensor> buffers;  // one per buffer name, contiguous, shaped like the parameter
  };
  // `name` names the optimizer in errors; `buffer_names` the per-parameter state it keeps.
  Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay,
            std::vector<std::string> buffer_names);
  // One parameter's part of a step: p (contiguous) and g (contiguous, p's shape and dtype) on
  // one device, its state (step already counted) and its group's hyperparameters.
  struct Update {
    Tensor param, grad;
    State* state;
    double lr, weight_decay;
  };
  // Applies one step to every parameter in `updates` (all on one device).
  virtual void update(const std::vector<Update>& updates) = 0;

 private:
  std::string name_;
  std::vector<ParamGroup> groups_;
  std::vector<std::string> buffer_names_;
  std::map<std::string, State> state_;
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0;
  bool nesterov = false;  // needs momentum > 0
  double weight_decay = 0;  // L2: added to the gradient, as in PyTorch's SGD
};

// PyTorch's SGD (dampening 0): g += wd*p; b = g on the first step, else momentum*b + g;
// p -= lr * (nesterov ? g + momentum*b : b)   (plain p -= lr*g without momentum).
class SGD : public Optimizer {
 public:
  SGD(NamedParams params, SGDOptions opts = {});
  SGD(const std::vector<Tensor>& params, SGDOptions opts = {}) : SGD(numbered(params), opts) {}
  SGD(const std::vector<Tensor>& params, double lr) : SGD(numbered(params), SGDOptions{.lr = lr}) {}
  SGD(std::vector<ParamGroup> groups, SGDOptions opts = {});

 private:
  void update(const std::vector<Update>& updates) override;
  SGDOptions opts_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// PyTorch's AdamW: p *= 1 - lr*wd (decoupled decay); m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2;
// p -= lr/(1 - b1^t) * m / (sqrt(v)/sqrt(1 - b2^t) + eps), t = this parameter's step count.
class AdamW : public Optimizer {
 public:
  AdamW(NamedParams params, AdamWOptions opts = {});
  AdamW(const std::vector<Tensor>& params, AdamWOptions opts = {}) : AdamW(numbered(params), opts) {}
  AdamW(const std::vector<Tensor>& params, double lr) : AdamW(numbered(params), AdamWOptions{.lr = lr}) {}
  AdamW(std::vector<ParamGroup> groups, AdamWOptions opts = {});

 protected:
  // Adam's constructor: the same step with `decoupled` false puts the decay into the gradient.
  AdamW(std::string name, std::vector<ParamGroup> groups, AdamWOptions opts, bool decoupled);

 private:
  void update(const std::vector<Update>& updates) override;
  AdamWOptions opts_;
  bool decoupled_ = true;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient, as in PyTorch's Adam
};

// PyTorch's Adam: g += wd*p, then AdamW's update without its decoupled decay (the same fused
// Backend::adamw_step). With weight_decay 0 (the default) it is AdamW with weight_decay 0.
class Adam : public AdamW {
 public:
  Adam(NamedParams params, AdamOptions opts = {});
  Adam(const std::vector<Tensor>& params, AdamOptions opts = {}) : Adam(numbered(params), opts) {}
  Adam(const std::vector<Tensor>& params, double lr) : Adam(numbered(params), AdamOptions{.lr = lr}) {}
  Adam(std::vector<ParamGroup> groups, AdamOptions opts = {});
};

// Two groups for AdamW: {decayed} with weight_decay, and {not decayed} with 0, the latter holding
// biases and norm weights (every parameter with dim < 2), embeddings (names containing "emb")
// and every parameter whose name contains one of `no_decay` (e.g. "mix" for MHLA's matrix).
std::vector<ParamGroup> adamw_param_groups(const Module& module, double weight_decay,
                                           const std::vector<std::string>& no_decay = {});

struct WarmupCosine {
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double max_lr = 1e-3;
  double min_lr = 0;
  double start_lr = 0;  // the lr at step 0
};

// The lr for `step` (0-based): linear from start_lr (step 0) to max_lr (step warmup_steps), then
// half a cosine down to min_lr at total_steps, and min_lr after that.
double warmup_cosine(int64_t step, const WarmupCosine& s);

// Scales the gradients of `params` in place so that their global L2 norm is at most max_norm
// (by max_norm / (norm + 1e-6), as PyTorch); returns the norm before clipping, summed in double.
// Parameters without a gradient are skipped.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace linea::nn
