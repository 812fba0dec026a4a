// libtorch's spelling of the optimizers: linea::optim::SGD(params, optim::SGDOptions(0.1).momentum(0.9)),
// as torch::optim's. The optimizers are nn's (nn/optim.h); each options class here only fills in
// nn's options aggregate, one setter per field, and converts to it, so the two spellings build the
// same optimizer. libtorch options linea does not have (SGD's dampening, Adam's amsgrad) are absent,
// so a port that uses them fails to compile instead of running with a different algorithm.
#pragma once
#include <tuple>

#include "linea/nn/optim.h"

namespace linea::optim {

using nn::Adam;
using nn::AdamW;
using nn::Optimizer;
using nn::SGD;

class SGDOptions {
 public:
  SGDOptions(double lr) { o_.lr = lr; }  // implicit, as libtorch's: SGD(params, 0.1) reads the same
  SGDOptions& lr(double v) { return o_.lr = v, *this; }
  SGDOptions& momentum(double v) { return o_.momentum = v, *this; }
  SGDOptions& nesterov(bool v) { return o_.nesterov = v, *this; }
  SGDOptions& weight_decay(double v) { return o_.weight_decay = v, *this; }
  operator nn::SGDOptions() const { return o_; }

 private:
  nn::SGDOptions o_;
};

// Adam's and AdamW's options have one set of setters; they differ in the optimizer they fill and
// its default weight decay (Adam 0, AdamW 0.01, as in libtorch).
template <class Options>
class AdamFamilyOptions {
 public:
  AdamFamilyOptions(double lr = 1e-3) { o_.lr = lr; }
  AdamFamilyOptions& lr(double v) { return o_.lr = v, *this; }
  AdamFamilyOptions& betas(const std::tuple<double, double>& b) {
    std::tie(o_.beta1, o_.beta2) = b;
    return *this;
  }
  AdamFamilyOptions& eps(double v) { return o_.eps = v, *this; }
  AdamFamilyOptions& weight_decay(double v) { return o_.weight_decay = v, *this; }
  operator Options() const { return o_; }

 private:
  Options o_;
};
using AdamOptions = AdamFamilyOptions<nn::AdamOptions>;
using AdamWOptions = AdamFamilyOptions<nn::AdamWOptions>;

}  // namespace linea::optim
