#include "linea/nn/module.h"

#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::nn {

Tensor Module::forward(const Tensor&) {
  throw Error(fmt::format("[{}] has no single-input forward(x); call its own forward overload", type_name_));
}

void Module::check_name(const std::string& name) const {
  LINEA_CHECK(!name.empty() && name.find('.') == std::string::npos,
              "[{}] invalid member name '{}': must be non-empty and contain no '.'", type_name_, name);
  auto taken = [&](const auto& v) {
    for (const auto& [n, _] : v)
      if (n == name) return true;
    return false;
  };
  LINEA_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), "[{}] name '{}' is already registered",
              type_name_, name);
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name);
  LINEA_CHECK(t.defined(), "[{}] parameter '{}' is undefined", type_name_, name);
  // A parameter is always a leaf that owns its data.
  t = t.detach();
  if (requires_grad) t.requires_grad_();
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name);
  LINEA_CHECK(t.defined(), "[{}] buffer '{}' is undefined", type_name_, name);
  buffers_.emplace_back(name, t.detach());
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name);
  LINEA_CHECK(m != nullptr, "[{}] child module '{}' is null", type_name_, name);
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool params) const {
  for (const auto& [n, t] : params ? params_ : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", out, params);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, true);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, false);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::zero_grad() {
  for (Tensor t : parameters()) t.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, c] : children_) c->train(on);
}

StateDict Module::state_dict() const {
  StateDict sd;
  for (auto& [n, t] : named_parameters()) sd.emplace(n, t);
  for (auto& [n, t] : named_buffers()) sd.emplace(n, t);
  return sd;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict mine = state_dict();
  std::vector<std::string> problems;
  for (const auto& [name, dst] : mine) {
    auto it = state.find(name);
    if (it == state.end()) {
      if (strict) problems.push_back(fmt::format("missing key '{}'", name));
      continue;
    }
    const Tensor& src = it->second;
    if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
      problems.push_back(fmt::format("'{}': expected {} {}, got {} {}", name, shape_str(dst.shape()), dst.dtype(),
                                     shape_str(src.shape()), src.dtype()));
  }
  if (strict)
    for (const auto& [name, _] : state)
      if (!mine.count(name)) problems.push_back(fmt::format("unexpected key '{}'", name));
  LINEA_CHECK(problems.empty(), "[load_state_dict] {}: {}", type_name_, fmt::join(problems, "; "));
  for (const auto& [name, dst] : mine) {
    auto it = state.find(name);
    if (it == state.end()) continue;
    const Tensor& src = it->second;
    if (src.device() == dst.device()) {
      backend(dst.device()).copy(src, dst);
    } else {  // through the host
      Tensor host = src.to(Device::cpu()).contiguous();
      backend(dst.device()).copy_from_host(*dst.storage(), dst.offset() * itemsize(dst.dtype()), host.data_ptr(),
                                           host.numel() * itemsize(host.dtype()));
    }
  }
}

}  // namespace linea::nn
