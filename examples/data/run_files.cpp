#include "data/run_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <linea/linea.h>

namespace linea::data {

namespace fs = std::filesystem;

RunStart run_start(const std::string& dir, const std::string& resume, bool overwrite) {
  if (!resume.empty()) {
    const fs::path parent = fs::path(resume).parent_path();
    std::error_code ec;
    if (fs::equivalent(parent.empty() ? fs::path(".") : parent, dir, ec)) return RunStart::Resume;
  }
  return overwrite ? RunStart::Overwrite : RunStart::Fresh;
}

std::string sibling_program(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);  // Linux
  return ec ? name : (self.parent_path() / name).string();
}

namespace {

// A Fresh start needs an empty directory: a lock file a run left behind does not count.
void check_empty(const std::string& program, const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename() != kRunLockFile) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  LINEA_CHECK(names.empty(),
              "[{}] --out '{}' is not empty (it holds {}{}): give --overwrite on to replace the run in it, --resume "
              "CHECKPOINT to continue it, or another --out",
              program, dir, fmt::join(names.begin(), names.begin() + std::min<size_t>(names.size(), 3), ", "),
              names.size() > 3 ? ", ..." : "");
}

// The pid the holder of a lock file wrote into it ("?" while it has not written it yet).
std::string holder_pid(int fd) {
  for (int attempt = 0; attempt < 50; ++attempt) {  // the holder writes it right after locking
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0 && buf[n - 1] == '\n') return std::string(buf, static_cast<size_t>(n - 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "?";
}

[[noreturn]] void in_use(const std::string& program, const std::string& dir, const std::string& path, int fd) {
  throw Error(fmt::format("[{}] --out '{}' is in use by another run (pid {}, which holds '{}'): wait for it to end or "
                          "give another --out", program, dir, holder_pid(fd), path));
}

// Refuses a directory whose lock a live run holds, without taking or creating the lock.
void check_unlocked(const std::string& program, const std::string& dir) {
  const std::string path = (fs::path(dir) / kRunLockFile).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no lock file: no run has held it
  const RunLock probe(fd);
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) in_use(program, dir, path, fd);
}

RunLock lock_run_dir(const std::string& program, const std::string& dir) {
  const std::string path = (fs::path(dir) / kRunLockFile).string();
  // O_CLOEXEC: a child process (gnuplot) must not inherit, and so keep, the lock.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST) fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  LINEA_CHECK(fd >= 0, "[{}] cannot create the lock file '{}': {}", program, path, std::strerror(errno));
  RunLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) in_use(program, dir, path, fd);
    throw Error(fmt::format("[{}] cannot lock '{}': {}", program, path, std::strerror(err)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const int err = errno;
    if (created) ::unlink(path.c_str());  // a full disk leaves no empty file behind
    throw Error(fmt::format("[{}] cannot write the lock file '{}': {}", program, path, std::strerror(err)));
  }
  return lock;
}

}  // namespace

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the flock
}

void check_run_dir(const std::string& program, const std::string& dir, RunStart start) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    LINEA_CHECK(fs::is_directory(dir, ec), "[{}] --out '{}' exists and is not a directory", program, dir);
    LINEA_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, "[{}] --out '{}': cannot write into it: {}", program, dir,
                std::strerror(errno));
    check_unlocked(program, dir);
    if (start == RunStart::Fresh) check_empty(program, dir);
    return;
  }
  // It will be created: the nearest folder that exists above it must be a writable directory.
  fs::path up = fs::absolute(dir, ec).parent_path();
  while (!up.empty() && !fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
  LINEA_CHECK(fs::is_directory(up, ec), "[{}] --out '{}': '{}' is not a directory", program, dir, up.string());
  LINEA_CHECK(::access(up.c_str(), W_OK | X_OK) == 0, "[{}] --out '{}': cannot create it in '{}': {}", program, dir,
              up.string(), std::strerror(errno));
}

RunLock open_run_dir(const std::string& program, const std::string& dir, RunStart start,
                     const std::vector<std::string>& run_files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LINEA_CHECK(!ec, "[{}] cannot create the run directory '{}': {}", program, dir, ec.message());
  RunLock lock = lock_run_dir(program, dir);
  if (start == RunStart::Fresh) check_empty(program, dir);
  if (start == RunStart::Overwrite)
    for (const std::string& name : run_files) {
      fs::remove(fs::path(dir) / name, ec);
      LINEA_CHECK(!ec, "[{}] cannot remove the previous run's '{}' in '{}': {}", program, name, dir, ec.message());
    }
  remove_stale_temp_files(dir);
  return lock;
}

void Checksum::add(const void* bytes, size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 1099511628211ull;  // FNV-1a's prime
  bytes_ += n;
}

std::string Checksum::str() const { return fmt::format("{} bytes, fnv1a {:016x}", bytes_, hash_); }

std::string file_checksum(const std::string& program, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LINEA_CHECK(in.is_open(), "[{}] cannot read '{}': {}", program, path, std::strerror(errno));
  Checksum c;
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0)
    c.add(buf.data(), static_cast<size_t>(in.gcount()));
  LINEA_CHECK(in.eof(), "[{}] reading '{}' failed", program, path);
  return c.str();
}

void write_run_file(const std::string& program, const std::string& path, const std::string& text) {
  write_file_atomically(path, {text}, program);
}

namespace {

// The integer in column `col` of a CSV row, or -1 when the row is not one of `fields` fields or
// that field is not an integer (a row cut off by a full disk or a kill).
int64_t csv_int(const std::string& row, size_t col, size_t fields) {
  if (static_cast<size_t>(std::count(row.begin(), row.end(), ',')) + 1 != fields) return -1;
  std::istringstream in(row);
  std::string field;
  for (size_t i = 0; i <= col; ++i) std::getline(in, field, ',');
  char* end = nullptr;
  const long long v = std::strtoll(field.c_str(), &end, 10);
  return !field.empty() && *end == '\0' && v >= 0 ? v : -1;
}

}  // namespace

MetricsCsv::MetricsCsv(std::string program, std::string path, const std::string& header, bool resume,
                       const std::string& step_column, int64_t step)
    : program_(std::move(program)), path_(std::move(path)) {
  std::string text = header + "\n";
  std::ifstream old(path_);
  if (resume && old.is_open()) {
    std::string line;
    std::getline(old, line);
    LINEA_CHECK(line == header, "[{}] '{}' starts with '{}', not this run's header '{}'", program_, path_, line,
                header);
    size_t col = 0;
    for (std::istringstream names(header); std::getline(names, line, ',') && line != step_column;) ++col;
    const size_t fields = static_cast<size_t>(std::count(header.begin(), header.end(), ',')) + 1;
    while (std::getline(old, line)) {
      const int64_t s = csv_int(line, col, fields);
      if (s >= 0 && s <= step) text += line + "\n";
    }
  }
  write_run_file(program_, path_, text);
  f_ = std::fopen(path_.c_str(), "a");
  LINEA_CHECK(f_ != nullptr, "[{}] cannot append to '{}': {}", program_, path_, std::strerror(errno));
}

MetricsCsv::~MetricsCsv() { std::fclose(f_); }

void MetricsCsv::append(const std::string& row) {
  LINEA_CHECK(std::fprintf(f_, "%s\n", row.c_str()) >= 0 && std::fflush(f_) == 0,
              "[{}] writing a row to '{}' failed: {}", program_, path_, std::strerror(errno));
}

}  // namespace linea::data
