// A training run's checkpoint, shared by the examples' trainers: model + optimizer
// (nn::save_checkpoint) with the step count under "step" in the metadata, so --resume continues at
// the step where the run stopped.
#pragma once
#include <cstdint>
#include <string>

#include <linea/linea.h>

namespace examples {

inline void save_run(const std::string& path, const linea::nn::Module& model, const linea::nn::Optimizer& optimizer,
                     int64_t step, linea::nn::Metadata meta) {
  meta["step"] = std::to_string(step);
  linea::nn::save_checkpoint(path, model, optimizer, meta);
}

// Loads into model and optimizer, sets `step`, returns the metadata. `program` names the caller
// in the error for a file without a step count.
inline linea::nn::Metadata load_run(const std::string& path, linea::nn::Module& model,
                                    linea::nn::Optimizer& optimizer, int64_t& step, const std::string& program) {
  linea::nn::Metadata meta = linea::nn::load_checkpoint(path, model, optimizer);
  LINEA_CHECK(meta.contains("step"), "[{}] '{}' has no step count: not a {} checkpoint", program, path, program);
  step = std::stoll(meta.at("step"));
  return meta;
}

}  // namespace examples
