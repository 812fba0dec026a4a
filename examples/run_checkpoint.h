// A training run's checkpoint, shared by the examples' trainers: model + optimizer
// (nn::save_checkpoint) with the step count under "step" in the metadata, so --resume continues at
// the step where the run stopped.
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <linea/linea.h>

namespace examples {

// A number stored in a checkpoint's metadata (text). A missing, non-numeric or non-finite entry is
// an error naming the file and the key, not a std::stod exception that aborts the program.
inline double meta_number(const linea::nn::Metadata& meta, const std::string& key, const std::string& path,
                          const std::string& program) {
  auto it = meta.find(key);
  LINEA_CHECK(it != meta.end(), "[{}] '{}' has no \"{}\" entry: not a {} checkpoint", program, path, key, program);
  const std::string& s = it->second;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  LINEA_CHECK(!s.empty() && *end == '\0' && errno != ERANGE && std::isfinite(v),
              "[{}] '{}': entry \"{}\" is '{}', not a finite number (a damaged checkpoint?)", program, path, key, s);
  return v;
}
inline int64_t meta_integer(const linea::nn::Metadata& meta, const std::string& key, const std::string& path,
                            const std::string& program) {
  const double v = meta_number(meta, key, path, program);
  LINEA_CHECK(v >= 0 && v <= 9e15 && v == std::floor(v),
              "[{}] '{}': entry \"{}\" is {}, not a count (a damaged checkpoint?)", program, path, key, v);
  return static_cast<int64_t>(v);
}

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
  step = meta_integer(meta, "step", path, program);
  return meta;
}

}  // namespace examples
