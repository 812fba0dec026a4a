// What the examples add to a training run's checkpoint (<linea/models/run_checkpoint.h>: model,
// optimizer and step): the program that wrote it under "program", so that another program's
// checkpoint is refused by name, the machine note of a resumed run, and the --on-nan policy.
#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <linea/linea.h>
#include <linea/models/run_checkpoint.h>

namespace examples {

// The metadata readers of the library's run checkpoints, by the names the programs use.
using linea::models::meta_integer;
using linea::models::meta_number;
using linea::models::meta_text;

// Refuses a checkpoint another program wrote, by name ("not a char_lm checkpoint"). A file
// without a "program" entry passes: its config then shows whose it is.
inline void check_program(const linea::nn::Metadata& meta, const std::string& path, const std::string& program) {
  auto it = meta.find("program");
  LINEA_CHECK(it == meta.end() || it->second == program, "[{}] '{}' is not a {} checkpoint (it is {}'s)", program,
              path, program, it->second);
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
