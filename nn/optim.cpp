#include "linea/nn/optim.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>
#include <set>

#include "linea/autograd/graph.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

// ---------------------------------------------------------------- projections

namespace {

// The registered projections, keyed by the parameter's TensorImpl. A weak_ptr, so a registration
// neither keeps its parameter alive nor outlives it (an expired entry never matches and is
// dropped at the next registration). A handful of entries: one per constrained parameter.
struct Projected {
  std::weak_ptr<TensorImpl> param;
  Projection projection;
};
std::mutex g_projections_mutex;
std::vector<Projected> g_projections;

Projection projection_of(const Tensor& p) {
  std::lock_guard lock(g_projections_mutex);
  for (const Projected& e : g_projections)
    if (e.param.lock() == p.impl_ptr()) return e.projection;
  return {};
}

}  // namespace

void set_projection(const Tensor& param, Projection projection) {
  LINEA_CHECK(param.defined(), "[set_projection] the parameter is undefined");
  std::lock_guard lock(g_projections_mutex);
  std::erase_if(g_projections,
                [&](const Projected& e) { return e.param.expired() || e.param.lock() == param.impl_ptr(); });
  if (projection) g_projections.push_back({param.impl_ptr(), std::move(projection)});
}

// ---------------------------------------------------------------- Optimizer

NamedParams numbered(const std::vector<Tensor>& params) {
  NamedParams named;
  named.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) named.emplace_back(std::to_string(i), params[i]);
  return named;
}

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay,
                     std::vector<std::string> buffer_names)
    : name_(std::move(name)), groups_(std::move(groups)), buffer_names_(std::move(buffer_names)) {
  std::set<std::string> names;
  std::set<const TensorImpl*> seen;
  for (size_t i = 0; i < groups_.size(); ++i) {
    ParamGroup& grp = groups_[i];
    if (!grp.lr) grp.lr = lr;
    if (!grp.weight_decay) grp.weight_decay = weight_decay;
    LINEA_CHECK(*grp.lr >= 0 && *grp.weight_decay >= 0, "[{}] group {}: lr ({}) and weight_decay ({}) must be >= 0",
                name_, i, *grp.lr, *grp.weight_decay);
    for (const auto& [n, p] : grp.params) {
      LINEA_CHECK(p.defined(), "[{}] parameter '{}' is undefined", name_, n);
      LINEA_CHECK(names.insert(n).second, "[{}] parameter name '{}' appears twice", name_, n);
      LINEA_CHECK(seen.insert(&p.impl()).second, "[{}] parameter '{}' appears twice (under another name)", name_, n);
      // An op's output never gets a .grad, and a tensor without requires_grad gets none either: the
      // optimizer would hold it and silently never update it.
      LINEA_CHECK(p.is_leaf(), "[{}] parameter '{}' is not a leaf tensor but an op's output, which never gets a "
                  "gradient; pass the tensor the model trains (a parameter), not an expression of it", name_, n);
      LINEA_CHECK(p.requires_grad(), "[{}] parameter '{}' does not require grad, so it would never be updated; "
                  "call requires_grad_() on it, or leave it out (frozen)", name_, n);
      LINEA_CHECK(is_floating(p.dtype()) && p.is_contiguous(),
                  "[{}] parameter '{}' must be a contiguous float32/float64 tensor, got {} of shape {}{}", name_, n,
                  p.dtype(), shape_str(p.shape()), p.is_contiguous() ? "" : " (non-contiguous)");
    }
  }
  LINEA_CHECK(!names.empty(), "[{}] got no parameters", name_);
}

void Optimizer::step() {
  NoGradGuard no_grad;  // updates are not part of any graph
  // The parameters with gradients, per device (one fused backend call each; usually one device).
  std::vector<std::pair<Device, std::vector<Update>>> per_device;
  for (const ParamGroup& grp : groups_) {
    for (const auto& [n, p] : grp.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      LINEA_CHECK(g.device() == p.device() && g.shape() == p.shape() && g.dtype() == p.dtype(),
                  "[{}] '{}': gradient {} {} on {} does not match the parameter {} {} on {}", name_, n, g.dtype(),
                  shape_str(g.shape()), g.device(), p.dtype(), shape_str(p.shape()), p.device());
      State& s = state_[n];
      if (s.buffers.empty())
        for (size_t b = 0; b < buffer_names_.size(); ++b) s.buffers.push_back(zeros_like(p));
      ++s.step;
      auto it = std::find_if(per_device.begin(), per_device.end(),
                             [dev = p.device()](const auto& d) { return d.first == dev; });
      if (it == per_device.end()) it = per_device.insert(per_device.end(), {p.device(), {}});
      it->second.push_back({p, g.contiguous(), &s, *grp.lr, *grp.weight_decay});
    }
  }
  for (const auto& [_, updates] : per_device) {
    update(updates);
    for (const Update& u : updates)
      if (Projection project = projection_of(u.param)) project(u.param);
  }
}

void Optimizer::zero_grad() {
  for (ParamGroup& grp : groups_)
    for (auto& [_, p] : grp.params) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  LINEA_CHECK(lr >= 0, "[{}] lr must be >= 0, got {}", name_, lr);
  for (ParamGroup& grp : groups_) grp.lr = lr;
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  for (size_t i = 0; i < groups_.size(); ++i) {
    sd.emplace(fmt::format("param_groups.{}.lr", i), scalar(*groups_[i].lr, DType::Float64));
    sd.emplace(fmt::format("param_groups.{}.weight_decay", i), scalar(*groups_[i].weight_decay, DType::Float64));
  }
  for (const auto& [n, s] : state_) {
    sd.emplace(n + ".step", scalar(static_cast<double>(s.step), DType::Int64));
    for (size_t b = 0; b < buffer_names_.size(); ++b) sd.emplace(n + "." + buffer_names_[b], s.buffers[b].clone());
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& state) {
  std::vector<std::string> problems;
  std::set<std::string> used;
  // Finds `key`, checks its shape and dtype, and marks it used; null (and a problem) otherwise.
  auto take = [&](const std::string& key, const Shape& shape, DType dtype) -> const Tensor* {
    auto it = state.find(key);
    if (it == state.end()) {
      problems.push_back(fmt::format("missing key '{}'", key));
      return nullptr;
    }
    used.insert(key);
    if (it->second.shape() != shape || it->second.dtype() != dtype) {
      problems.push_back(fmt::format("'{}': expected {} {}, got {} {}", key, shape_str(shape), dtype,
                                     shape_str(it->second.shape()), it->second.dtype()));
      return nullptr;
    }
    return &it->second;
  };

  std::vector<std::pair<double, double>> hyper;  // (lr, weight_decay) per group
  std::map<std::string, State> loaded;
  for (size_t i = 0; i < groups_.size(); ++i) {
    const Tensor* lr = take(fmt::format("param_groups.{}.lr", i), {}, DType::Float64);
    const Tensor* wd = take(fmt::format("param_groups.{}.weight_decay", i), {}, DType::Float64);
    if (lr && wd) hyper.emplace_back(lr->item(), wd->item());
    for (const auto& [n, p] : groups_[i].params) {
      if (!state.count(n + ".step")) continue;  // never updated: no state
      const Tensor* step = take(n + ".step", {}, DType::Int64);
      State s;
      if (step) s.step = static_cast<int64_t>(step->item());
      if (s.step < 0) problems.push_back(fmt::format("'{}.step' is negative ({})", n, s.step));
      for (const std::string& b : buffer_names_) {
        const Tensor* buf = take(n + "." + b, p.shape(), p.dtype());
        if (buf) s.buffers.push_back(buf->to(p.device()).clone());
      }
      loaded.emplace(n, std::move(s));
    }
  }
  for (const auto& [key, _] : state)
    if (!used.count(key)) problems.push_back(fmt::format("unexpected key '{}'", key));
  LINEA_CHECK(problems.empty(), "[{}.load_state_dict] {}", name_, fmt::join(problems, "; "));

  for (size_t i = 0; i < groups_.size(); ++i) std::tie(groups_[i].lr, groups_[i].weight_decay) = hyper[i];
  state_ = std::move(loaded);
}

// ---------------------------------------------------------------- SGD

SGD::SGD(NamedParams params, SGDOptions opts)
    : SGD(std::vector<ParamGroup>{{std::move(params), std::nullopt, std::nullopt}}, opts) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions opts)
    : Optimizer("SGD", std::move(groups), opts.lr, opts.weight_decay,
                opts.momentum > 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{}),
      opts_(opts) {
  LINEA_CHECK(opts.momentum >= 0, "[SGD] momentum must be >= 0, got {}", opts.momentum);
  LINEA_CHECK(!opts.nesterov || opts.momentum > 0, "[SGD] nesterov needs momentum > 0");
}

void SGD::update(const std::vector<Update>& updates) {
  std::vector<Backend::SgdParam> params;
  for (const Update& u : updates)
    params.push_back({u.param, u.grad, u.state->buffers.empty() ? Tensor() : u.state->buffers[0], u.lr,
                      u.weight_decay, u.state->step == 1});
  backend(updates.front().param.device()).sgd_step(params, opts_.momentum, opts_.nesterov);
}

// ---------------------------------------------------------------- AdamW

AdamW::AdamW(NamedParams params, AdamWOptions opts)
    : AdamW(std::vector<ParamGroup>{{std::move(params), std::nullopt, std::nullopt}}, opts) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions opts) : AdamW("AdamW", std::move(groups), opts, true) {}

AdamW::AdamW(std::string name, std::vector<ParamGroup> groups, AdamWOptions opts, bool decoupled)
    : Optimizer(name, std::move(groups), opts.lr, opts.weight_decay, {"exp_avg", "exp_avg_sq"}), opts_(opts),
      decoupled_(decoupled) {
  LINEA_CHECK(opts.beta1 >= 0 && opts.beta1 < 1 && opts.beta2 >= 0 && opts.beta2 < 1,
              "[{}] betas must be in [0, 1), got ({}, {})", name, opts.beta1, opts.beta2);
  LINEA_CHECK(opts.eps >= 0, "[{}] eps must be >= 0, got {}", name, opts.eps);
}

void AdamW::update(const std::vector<Update>& updates) {
  std::vector<Backend::AdamWParam> params;
  for (const Update& u : updates) {
    // Bias corrections of this parameter's step count t, in double.
    const double t = static_cast<double>(u.state->step);
    const double bc1 = 1 - std::pow(opts_.beta1, t), bc2 = 1 - std::pow(opts_.beta2, t);
    // Adam's L2 decay is part of the gradient the moments see; AdamW's scales the parameter.
    const bool l2 = !decoupled_ && u.weight_decay != 0;
    const Tensor g = l2 ? u.grad + u.param * u.weight_decay : u.grad;
    params.push_back({u.param, g, u.state->buffers[0], u.state->buffers[1],
                      decoupled_ ? 1 - u.lr * u.weight_decay : 1.0, u.lr / bc1, std::sqrt(bc2)});
  }
  backend(updates.front().param.device()).adamw_step(params, opts_.beta1, opts_.beta2, opts_.eps);
}

// ---------------------------------------------------------------- Adam

Adam::Adam(NamedParams params, AdamOptions opts)
    : Adam(std::vector<ParamGroup>{{std::move(params), std::nullopt, std::nullopt}}, opts) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions opts)
    : AdamW("Adam", std::move(groups),
            {.lr = opts.lr, .beta1 = opts.beta1, .beta2 = opts.beta2, .eps = opts.eps,
             .weight_decay = opts.weight_decay},
            false) {}

std::vector<ParamGroup> adamw_param_groups(const Module& module, double weight_decay,
                                           const std::vector<std::string>& no_decay) {
  ParamGroup decay{{}, std::nullopt, weight_decay}, keep{{}, std::nullopt, 0.0};
  for (auto& [n, p] : module.named_parameters()) {
    bool exempt = p.dim() < 2 || n.find("emb") != std::string::npos;
    for (const std::string& s : no_decay) exempt = exempt || n.find(s) != std::string::npos;
    (exempt ? keep : decay).params.emplace_back(n, p);
  }
  return {decay, keep};
}

// ---------------------------------------------------------------- schedule and clipping

double warmup_cosine(int64_t step, const WarmupCosine& s) {
  LINEA_CHECK(step >= 0 && s.warmup_steps >= 0 && s.total_steps >= s.warmup_steps,
              "[warmup_cosine] needs step >= 0 and 0 <= warmup_steps <= total_steps, got step {}, warmup {}, total {}",
              step, s.warmup_steps, s.total_steps);
  if (step < s.warmup_steps)
    return s.start_lr + (s.max_lr - s.start_lr) * static_cast<double>(step) / static_cast<double>(s.warmup_steps);
  if (step >= s.total_steps) return s.min_lr;
  const double progress =
      static_cast<double>(step - s.warmup_steps) / static_cast<double>(s.total_steps - s.warmup_steps);
  return s.min_lr + 0.5 * (s.max_lr - s.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  LINEA_CHECK(max_norm > 0, "[clip_grad_norm_] max_norm must be > 0, got {}", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  // The gradients' sums of squares in one backend call per device (queued there; read below).
  struct OnDevice {
    Device device;
    std::vector<Tensor> grads;   // contiguous: a no-op for autograd's; the scaling below writes p.grad()
    std::vector<size_t> places;  // their indices in grads
  };
  std::vector<OnDevice> devices;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    auto on = std::find_if(devices.begin(), devices.end(), [&](const OnDevice& o) { return o.device == g.device(); });
    if (on == devices.end()) on = devices.insert(devices.end(), OnDevice{g.device(), {}, {}});
    on->grads.push_back(g.contiguous());
    on->places.push_back(grads.size());
    grads.push_back(g);
  }
  std::vector<double> squares(grads.size());
  for (const OnDevice& on : devices) {
    Tensor part = empty({int64_t(on.grads.size())}, DType::Float64, on.device);
    backend(on.device).sum_squares(on.grads, part);
    const std::vector<double> values = part.to_vector();
    for (size_t i = 0; i < on.places.size(); ++i) squares[on.places[i]] = values[i];
  }
  double sq = 0;  // summed over parameters in order, in double
  for (double s : squares) sq += s;
  const double norm = std::sqrt(sq);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    // g *= coef through g's storage: the contiguous ones (autograd's gradients are) in one backend
    // call per device, any other through a temporary.
    for (const OnDevice& on : devices) {
      std::vector<Tensor> contiguous;
      for (size_t place : on.places) {
        const Tensor& g = grads[place];
        if (g.is_contiguous()) contiguous.push_back(g);
        else backend(g.device()).copy(g * scalar(coef, {g.dtype(), g.device()}), g);
      }
      backend(on.device).scale_all(contiguous, coef);
    }
  }
  return norm;
}

}  // namespace linea::nn
