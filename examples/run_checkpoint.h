// A training run's checkpoint, shared by the examples' trainers: model + optimizer
// (nn::save_checkpoint) with the step count under "step" in the metadata, so --resume continues at
// the step where the run stopped, and the program that wrote it under "program", so that another
// program's checkpoint is refused by name. A checkpoint never holds a NaN or an infinity.
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <linea/linea.h>

namespace examples {

// A text entry of a checkpoint's metadata; a missing one is an error naming the file and the key.
inline std::string meta_text(const linea::nn::Metadata& meta, const std::string& key, const std::string& path,
                             const std::string& program) {
  auto it = meta.find(key);
  LINEA_CHECK(it != meta.end(), "[{}] '{}' has no \"{}\" entry: not a {} checkpoint", program, path, key, program);
  return it->second;
}

// A number stored in a checkpoint's metadata (text). A missing, non-numeric or non-finite entry is
// an error naming the file and the key, not a std::stod exception that aborts the program.
inline double meta_number(const linea::nn::Metadata& meta, const std::string& key, const std::string& path,
                          const std::string& program) {
  const std::string s = meta_text(meta, key, path, program);
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

// The name of the first tensor of `tensors` (under "<prefix><name>") that holds a NaN or an
// infinity, or "" when all are finite.
inline std::string first_nonfinite(const linea::nn::StateDict& tensors, const std::string& prefix) {
  for (const auto& [name, t] : tensors) {
    if (!linea::is_floating(t.dtype())) continue;
    for (double v : t.to_vector())
      if (!std::isfinite(v)) return prefix + name;
  }
  return "";
}

// Refuses (linea::Error) to save a model or optimizer holding a non-finite value: a diverged run's
// weights are worth nothing, and written they would replace the last good checkpoint at `path`.
inline void save_run(const std::string& path, const linea::nn::Module& model, const linea::nn::Optimizer& optimizer,
                     int64_t step, linea::nn::Metadata meta) {
  meta["step"] = std::to_string(step);
  std::string bad = first_nonfinite(model.state_dict(), "model.");
  if (bad.empty()) bad = first_nonfinite(optimizer.state_dict(), "optim.");
  LINEA_CHECK(bad.empty(),
              "[{}] step {}: {} holds a NaN or an infinity (the run diverged), so it is not saved: '{}' keeps the last "
              "good checkpoint", meta.count("program") ? meta["program"] : "checkpoint", step, bad, path);
  linea::nn::save_checkpoint(path, model, optimizer, meta);
}

// Refuses a checkpoint another program wrote, by name ("not a char_lm checkpoint"). A file
// without a "program" entry passes: its config then shows whose it is.
inline void check_program(const linea::nn::Metadata& meta, const std::string& path, const std::string& program) {
  auto it = meta.find("program");
  LINEA_CHECK(it == meta.end() || it->second == program, "[{}] '{}' is not a {} checkpoint (it is {}'s)", program,
              path, program, it->second);
}

// Loads into model and optimizer, sets `step`, returns the metadata. `program` names the caller
// in the error for a file without a step count.
inline linea::nn::Metadata load_run(const std::string& path, linea::nn::Module& model,
                                    linea::nn::Optimizer& optimizer, int64_t& step, const std::string& program) {
  linea::nn::Metadata meta = linea::nn::load_checkpoint(path, model, optimizer);
  step = meta_integer(meta, "step", path, program);
  return meta;
}

// A resumed run on another number of threads or another device sums in another order: a note
// saying so, or "" when both are the checkpoint's ("threads", "device" in its metadata).
inline std::string resume_machine_note(const linea::nn::Metadata& meta, const std::string& path,
                                       const std::string& program, int64_t threads, const std::string& device) {
  const int64_t saved_threads = meta_integer(meta, "threads", path, program);
  const std::string saved_device = meta_text(meta, "device", path, program);
  if (saved_threads == threads && saved_device == device) return "";
  return fmt::format("{}: resuming on {} x {} threads, the checkpoint's run used {} x {}: sums run in another order, so "
                     "the numbers differ from an uninterrupted run's at rounding (--threads {} --device {} repeats "
                     "them bit for bit)", program, device, threads, saved_device, saved_threads, saved_threads,
                     saved_device);
}

// --on-nan: what a run does after a step whose loss or grad norm was NaN or infinite (such a step
// changes nothing: StepStats::finite). "stop" ends the run, keeping its last good checkpoint;
// "skip-step" goes on, but not past kMaxInARow such steps in a row.
struct NanGuard {
  static constexpr int64_t kMaxInARow = 10;
  std::string policy = "stop";  // stop | skip-step
  int64_t skipped = 0, in_a_row = 0;  // such steps in all, and the last ones in a row

  // Counts a step; true when the run must stop.
  bool must_stop(bool finite) {
    if (finite) {
      in_a_row = 0;
      return false;
    }
    ++skipped, ++in_a_row;
    return policy == "stop" || in_a_row > kMaxInARow;
  }
  // Why the run stops, and what is left: the last good checkpoint (`good`, at `good_step`; -1: none
  // yet, the first coming at `first_save`) and how to resume from it (`self`: the program's path).
  // One line.
  std::string stop_message(const std::string& program, const std::string& self, const std::string& what,
                           const std::string& good, int64_t good_step, const std::string& first_save) const {
    const std::string why =
        policy == "stop" ? "--on-nan stop" : fmt::format("--on-nan skip-step, {} such steps in a row", in_a_row);
    const std::string kept =
        good_step < 0 ? fmt::format("no checkpoint was saved yet (the first comes at {})", first_save)
                      : fmt::format("the last good checkpoint is {} (step {}), not overwritten: resume with {} --resume "
                                    "{}{}", good, good_step, self, good,
                                    policy == "stop" ? " --on-nan skip-step to skip such steps" : "");
    return fmt::format("[{}] {}: the run diverged and stops ({}); {}", program, what, why, kept);
  }
};

}  // namespace examples
