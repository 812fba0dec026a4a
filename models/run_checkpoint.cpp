#include "linea/models/run_checkpoint.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "linea/tensor/error.h"

namespace linea::models {

std::string meta_text(const nn::Metadata& meta, const std::string& key, const std::string& path,
                      const std::string& program) {
  auto it = meta.find(key);
  LINEA_CHECK(it != meta.end(), "[{}] '{}' has no \"{}\" entry: not a {} checkpoint", program, path, key, program);
  return it->second;
}

double meta_number(const nn::Metadata& meta, const std::string& key, const std::string& path,
                   const std::string& program) {
  const std::string s = meta_text(meta, key, path, program);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  LINEA_CHECK(!s.empty() && *end == '\0' && errno != ERANGE && std::isfinite(v),
              "[{}] '{}': entry \"{}\" is '{}', not a finite number (a damaged checkpoint?)", program, path, key, s);
  return v;
}

int64_t meta_integer(const nn::Metadata& meta, const std::string& key, const std::string& path,
                     const std::string& program) {
  const double v = meta_number(meta, key, path, program);
  LINEA_CHECK(v >= 0 && v <= 9e15 && v == std::floor(v),
              "[{}] '{}': entry \"{}\" is {}, not a count (a damaged checkpoint?)", program, path, key, v);
  return static_cast<int64_t>(v);
}

namespace {

// The name of the first tensor of `tensors` (under "<prefix><name>") that holds a NaN or an
// infinity, or "" when all are finite.
std::string first_nonfinite(const nn::StateDict& tensors, const std::string& prefix) {
  for (const auto& [name, t] : tensors) {
    if (!is_floating(t.dtype())) continue;
    for (double v : t.to_vector())
      if (!std::isfinite(v)) return prefix + name;
  }
  return "";
}

}  // namespace

void save_run(const std::string& path, const nn::Module& model, const nn::Optimizer& optimizer, int64_t step,
              nn::Metadata meta) {
  meta["step"] = std::to_string(step);
  std::string bad = first_nonfinite(model.state_dict(), "model.");
  if (bad.empty()) bad = first_nonfinite(optimizer.state_dict(), "optim.");
  LINEA_CHECK(bad.empty(),
              "[{}] step {}: {} holds a NaN or an infinity (the run diverged), so it is not saved: '{}' keeps the last "
              "good checkpoint", meta.count("program") ? meta["program"] : "checkpoint", step, bad, path);
  nn::save_checkpoint(path, model, optimizer, meta);
}

nn::Metadata load_run(const std::string& path, nn::Module& model, nn::Optimizer& optimizer, int64_t& step,
                      const std::string& fallback) {
  nn::Metadata meta = nn::load_checkpoint(path, model, optimizer);
  auto it = meta.find("program");
  step = meta_integer(meta, "step", path, it == meta.end() ? fallback : it->second);
  return meta;
}

}  // namespace linea::models
