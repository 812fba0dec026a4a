// A training run's directory (--out) and the files in it: config.txt, vocab.json, metrics.csv,
// checkpoint.safetensors, run.lock. Two runs never mix their files: a new run refuses a directory
// that holds anything unless told to replace the old run (--overwrite on), writes nothing before it
// is known to start, and holds a lock on the directory (run.lock) while it runs, so a second run
// started into it at the same time is refused. Every file is written atomically (write_file_atomically) and every write is
// checked, so a full disk is an error, not an empty file.
//
//   const RunStart start = run_start(out, o.resume, o.overwrite);
//   check_run_dir("char_lm", out, start);              // first: refuse before loading anything
//   ... load the data, build the model, load the checkpoint ...
//   const RunLock lock = open_run_dir("char_lm", out, start, run_files);  // then lock it, clear what is stale
//   write_run_file("char_lm", out + "/config.txt", line);
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace linea::data {

enum class RunStart {
  Fresh,      // a new run: the directory must be empty or not exist
  Resume,     // continuing the run whose checkpoint is in this directory
  Overwrite,  // a new run replacing the one in this directory (its run files are removed)
};

// Resume when `resume` (a checkpoint, or "") lies in `dir`, else Overwrite or Fresh.
RunStart run_start(const std::string& dir, const std::string& resume, bool overwrite);

// Refuses a `dir` that is not a directory, one whose lock a live run holds, and for a Fresh start
// one that holds anything. Changes nothing. Errors start with "[program]".
void check_run_dir(const std::string& program, const std::string& dir, RunStart start);

// The run's hold on its directory: an exclusive advisory lock (flock) on <dir>/run.lock, which
// holds the pid of the process holding it. It ends when the RunLock is destroyed or the process
// ends, however it ends (kill -9 too), so a dead run's lock file is simply taken over.
class RunLock {
 public:
  RunLock() = default;
  explicit RunLock(int fd) : fd_(fd) {}
  RunLock(RunLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  RunLock& operator=(RunLock&& other) noexcept;
  ~RunLock();

 private:
  int fd_ = -1;
};
inline constexpr const char* kRunLockFile = "run.lock";

// Once the run is known to start: creates `dir` and locks it (another live run holding it is an
// error naming that run's pid), checks again that a Fresh start finds it empty (a run may have
// filled it since check_run_dir), removes `run_files` (names inside it) for an Overwrite, and the
// temp files of writers that were killed mid-save (kill -9) for any start.
[[nodiscard]] RunLock open_run_dir(const std::string& program, const std::string& dir, RunStart start,
                                   const std::vector<std::string>& run_files);

// A fingerprint of data, to tell whether a resumed run reads what it was trained on: the byte
// count and the bytes' FNV-1a hash (64 bits), as "<n> bytes, fnv1a <16 hex digits>".
class Checksum {
 public:
  void add(const void* bytes, size_t n);
  std::string str() const;

 private:
  uint64_t hash_ = 14695981039346656037ull;  // FNV-1a's offset basis
  uint64_t bytes_ = 0;
};
// A file's Checksum; errors start with "[program]".
std::string file_checksum(const std::string& program, const std::string& path);

// "<this program's folder>/<name>": how to call a program built beside this one (plot_metrics, or
// the program itself) in an end-of-run message. Falls back to `name` where /proc is not there.
std::string sibling_program(const std::string& name);

// `text` to `path`, atomically; errors start with "[program]".
void write_run_file(const std::string& program, const std::string& path, const std::string& text);

// metrics.csv: a header line, then one row per evaluation appended (and flushed) as it happens.
class MetricsCsv {
 public:
  // A fresh run writes the header alone. A resumed one keeps the header and the rows whose
  // `step_column` is at most `step` (the checkpoint's step: later rows were written after the
  // checkpoint, and the resumed run writes them again), and starts a missing file with the header.
  MetricsCsv(std::string program, std::string path, const std::string& header, bool resume,
             const std::string& step_column, int64_t step);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;

  void append(const std::string& row);  // one line, without the newline; throws when the write fails

 private:
  std::string program_, path_;
  std::FILE* f_ = nullptr;
};

}  // namespace linea::data
