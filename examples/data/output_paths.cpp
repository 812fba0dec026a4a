#include "data/output_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/core.h>
#include <linea/linea.h>

namespace linea::data {

namespace fs = std::filesystem;

namespace {

// Creates `dir` (with parents); `who` starts the error: "[program] WHAT 'path'".
void create_dir(const std::string& who, const fs::path& dir) {
  std::error_code ec;
  LINEA_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec), "{}: '{}' exists and is not a directory", who,
              dir.string());
  fs::create_directories(dir, ec);
  LINEA_CHECK(!ec, "{}: cannot create '{}': {}", who, dir.string(), ec.message());
}

// Creates and removes "<prefix>.tmp.<pid>.XXXXXX", the name write_file_atomically gives its temp
// files, so that a probe left by a kill is removed like theirs (remove_stale_temp_files).
void probe(const std::string& who, const fs::path& prefix) {
  std::string name = fmt::format("{}.tmp.{}.XXXXXX", prefix.string(), ::getpid());
  const int fd = ::mkstemp(name.data());
  LINEA_CHECK(fd >= 0, "{}: cannot write in '{}': {}", who, prefix.parent_path().string(), std::strerror(errno));
  ::close(fd);
  ::unlink(name.c_str());
}

fs::path folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

void make_output_dir(const std::string& program, const std::string& what, const std::string& dir) {
  const std::string who = fmt::format("[{}] {} '{}'", program, what, dir);
  create_dir(who, dir);
  probe(who, fs::path(dir) / ".probe");
}

void check_output_file(const std::string& program, const std::string& what, const std::string& path) {
  const std::string who = fmt::format("[{}] {} '{}'", program, what, path);
  std::error_code ec;
  LINEA_CHECK(!path.empty(), "{} is empty: a file name is needed", who);
  LINEA_CHECK(path.back() != '/' && !fs::is_directory(path, ec), "{} is a directory, not a file name", who);
  create_dir(who, folder_of(path));
  probe(who, path);
}

}  // namespace linea::data
