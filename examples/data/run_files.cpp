#include "data/run_files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

void check_run_dir(const std::string& program, const std::string& dir, RunStart start) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    LINEA_CHECK(fs::is_directory(dir, ec), "[{}] --out '{}' exists and is not a directory", program, dir);
    LINEA_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, "[{}] --out '{}': cannot write into it: {}", program, dir,
                std::strerror(errno));
    if (start != RunStart::Fresh) return;
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().filename().string());
    std::sort(names.begin(), names.end());
    LINEA_CHECK(names.empty(),
                "[{}] --out '{}' is not empty (it holds {}{}): give --overwrite on to replace the run in it, --resume "
                "CHECKPOINT to continue it, or another --out",
                program, dir, fmt::join(names.begin(), names.begin() + std::min<size_t>(names.size(), 3), ", "),
                names.size() > 3 ? ", ..." : "");
    return;
  }
  // It will be created: the nearest folder that exists above it must be a writable directory.
  fs::path up = fs::absolute(dir, ec).parent_path();
  while (!up.empty() && !fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
  LINEA_CHECK(fs::is_directory(up, ec), "[{}] --out '{}': '{}' is not a directory", program, dir, up.string());
  LINEA_CHECK(::access(up.c_str(), W_OK | X_OK) == 0, "[{}] --out '{}': cannot create it in '{}': {}", program, dir,
              up.string(), std::strerror(errno));
}

void open_run_dir(const std::string& program, const std::string& dir, RunStart start,
                  const std::vector<std::string>& run_files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LINEA_CHECK(!ec, "[{}] cannot create the run directory '{}': {}", program, dir, ec.message());
  if (start == RunStart::Overwrite)
    for (const std::string& name : run_files) {
      fs::remove(fs::path(dir) / name, ec);
      LINEA_CHECK(!ec, "[{}] cannot remove the previous run's '{}' in '{}': {}", program, name, dir, ec.message());
    }
  remove_stale_temp_files(dir);
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
