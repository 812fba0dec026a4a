// Progress reporting for long runs, and the flag of a stop request (Ctrl-C, SIGTERM).
//
// On a terminal, Progress redraws one live line in place:
//   train 1234/4690 [26%] loss 0.5123 acc 0.8125 | 2874 img/s | ETA 1m52s
// Elsewhere (a log file, a pipe) it prints the same as plain lines every `log_every` steps or
// every `log_seconds`, whichever comes first; finish() ends with a one-line summary.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace linea::data {

struct Metric {
  std::string_view name;
  double value;
};

struct ProgressOptions {
  int64_t items_per_step = 1;  // e.g. the batch size, to report images/s instead of steps/s
  std::string unit = "it";     // what the items are called in the rate: "img", "tok", ...
  int64_t first_step = 0;      // a resumed run's starting step, so the rate counts only new steps
  int64_t log_every = 0;       // plain mode: a line every this many steps (0: about 20 per run)
  double log_seconds = 10;     // plain mode: and at least this often
  std::FILE* out = stdout;     // live mode is used when this is a terminal
};

class Progress {
 public:
  Progress(int64_t total, std::string label, ProgressOptions opts = {});
  // `step` counts completed steps, 1..total.
  void update(int64_t step, const std::vector<Metric>& metrics = {});
  // Ends the live line and prints "<label> done: <steps> steps in <time> (<rate>) <summary>".
  void finish(std::string_view summary = "");

 private:
  using Clock = std::chrono::steady_clock;
  std::string line(int64_t step, const std::vector<Metric>& metrics, double elapsed) const;
  int64_t total_;
  std::string label_;
  ProgressOptions opts_;
  bool live_;
  Clock::time_point start_, last_print_;
  int64_t step_, last_logged_;
};

// "12.3s", "4m05s", "1h02m".
std::string format_duration(double seconds);

// Installs (once) handlers for SIGINT (Ctrl-C) and SIGTERM (what `timeout`, batch schedulers and
// mpirun send): the first signal stores its number in the returned flag (0: none yet). Training
// loops poll it, finish the step, save a checkpoint and exit with stop_status(). A second signal
// ends the program at once. A signal the program was started ignoring (a background job of a
// script ignores SIGINT) stays ignored.
std::atomic<int>& install_stop_signals();
// What a shell reports for a program a signal ended, 128 + the signal: 130 for SIGINT, 143 for SIGTERM.
int stop_status(int signal);
// "SIGINT", "SIGTERM".
std::string signal_name(int signal);

}  // namespace linea::data
