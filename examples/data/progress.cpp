#include "data/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

namespace linea::data {

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 3600) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, s % 3600 / 60);
}

Progress::Progress(int64_t total, std::string label, ProgressOptions opts)
    : total_(total),
      label_(std::move(label)),
      opts_(std::move(opts)),
      live_(isatty(fileno(opts_.out)) == 1),
      start_(Clock::now()),
      last_print_(start_),
      step_(opts_.first_step),
      last_logged_(opts_.first_step) {
  if (opts_.log_every <= 0) opts_.log_every = std::max<int64_t>(1, (total_ - opts_.first_step) / 20);
}

std::string Progress::line(int64_t step, const std::vector<Metric>& metrics, double elapsed) const {
  std::string s = fmt::format("{} {}/{}", label_, step, total_);
  if (total_ > 0) s += fmt::format(" [{}%]", 100 * step / total_);
  for (const Metric& m : metrics) s += fmt::format(" {} {:.4f}", m.name, m.value);
  const int64_t done = step - opts_.first_step;
  if (done > 0 && elapsed > 0) {
    const double steps_per_s = done / elapsed;
    s += fmt::format(" | {:.0f} {}/s", steps_per_s * opts_.items_per_step, opts_.unit);
    if (step < total_) s += " | ETA " + format_duration((total_ - step) / steps_per_s);
  }
  return s;
}

void Progress::update(int64_t step, const std::vector<Metric>& metrics) {
  step_ = step;
  const auto now = Clock::now();
  const double since_print = std::chrono::duration<double>(now - last_print_).count();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (live_) {
    // Redraw at most 10 times a second: a terminal that scrolls fast slows the run down.
    if (since_print < 0.1 && step < total_) return;
    // \r goes back to the line start, \x1b[K clears what a longer previous line left behind.
    fmt::print(opts_.out, "\r{}\x1b[K", line(step, metrics, elapsed));
  } else {
    if (step - last_logged_ < opts_.log_every && since_print < opts_.log_seconds && step < total_) return;
    fmt::print(opts_.out, "{}\n", line(step, metrics, elapsed));
    last_logged_ = step;
  }
  std::fflush(opts_.out);
  last_print_ = now;
}

void Progress::finish(std::string_view summary) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const int64_t done = step_ - opts_.first_step;
  std::string s = fmt::format("{} done: {} steps in {}", label_, done, format_duration(elapsed));
  if (done > 0 && elapsed > 0)
    s += fmt::format(" ({:.0f} {}/s)", done * opts_.items_per_step / elapsed, opts_.unit);
  if (!summary.empty()) s += fmt::format(" {}", summary);
  fmt::print(opts_.out, "{}{}\n", live_ ? "\r\x1b[K" : "", s);
  std::fflush(opts_.out);
}

namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

void on_stop_signal(int sig) {
  if (g_stop.exchange(sig) != 0) {  // the second signal: its default action, i.e. quit now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  // write(), not stdio: only async-signal-safe calls are allowed here.
  const char term[] = "\n[SIGTERM] stopping after this step (a second signal quits at once)\n";
  const char intr[] = "\n[SIGINT] stopping after this step (Ctrl-C again to quit at once)\n";
  const bool is_term = sig == SIGTERM;
  [[maybe_unused]] auto n = write(STDERR_FILENO, is_term ? term : intr, (is_term ? sizeof term : sizeof intr) - 1);
}

}  // namespace

std::atomic<int>& install_stop_signals() {
  static const bool installed = [] {
    struct sigaction sa {}, old {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM}) {
      // A signal the parent told its children to ignore (a shell's background job, nohup) stays ignored.
      sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);
    }
    return true;
  }();
  (void)installed;
  return g_stop;
}

int stop_status(int signal) { return 128 + signal; }

std::string signal_name(int signal) {
  return signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : fmt::format("signal {}", signal);
}

}  // namespace linea::data
