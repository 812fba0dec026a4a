// Module: the base of every layer. Holds named parameters, buffers and child modules, so that a
// model knows its parameters by hierarchical name ("blocks.0.attn.qkv.weight"), can switch
// train/eval mode, and can save and load a state dict. Modeled on PyTorch's C++ frontend.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea::nn {

// Name -> tensor, ordered by name (deterministic checkpoints).
using StateDict = std::map<std::string, Tensor>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // The single-input forward used by Sequential and friends; layers with other signatures add
  // their own overloads.
  virtual Tensor forward(const Tensor& x);
  // model(x) is model.forward(x), as in libtorch. A layer whose forward takes other arguments
  // declares its own operator() beside its forward.
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- parameters, buffers, children (recursing into children, in registration order) ----
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;  // direct children
  int64_t num_parameters() const;  // total number of parameter elements
  void zero_grad();

  // ---- mode ----
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- state ----
  StateDict state_dict() const;  // parameters and buffers
  // Copies values into the existing tensors (so optimizers keep their references). With strict,
  // a missing or unexpected key is an error; a shape or dtype mismatch always is. All problems
  // are listed in one error, and nothing is modified unless every entry fits.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Registration returns the stored handle; keep a copy in the subclass for use in forward.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool params) const;
  void check_name(const std::string& name) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace linea::nn
