#include "linea/tensor/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "linea/tensor/error.h"

namespace linea {

namespace {

constexpr std::string_view kTempTag = ".tmp.";

// The pid in a "<name>.tmp.<pid>.XXXXXX" file name, or -1 for any other name.
long temp_file_pid(const std::string& name) {
  const size_t tag = name.rfind(kTempTag);
  if (tag == std::string::npos || tag == 0) return -1;
  const std::string rest = name.substr(tag + kTempTag.size());  // "<pid>.XXXXXX"
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || rest.size() - dot - 1 != 6) return -1;
  char* end = nullptr;
  const long pid = std::strtol(rest.c_str(), &end, 10);
  return end == rest.c_str() + dot && pid > 0 ? pid : -1;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts,
                           const std::string& op) {
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  const std::string kept = existed ? fmt::format("the previous '{}' is untouched", path)
                                   : fmt::format("'{}' was not created", path);
  std::string tmp = fmt::format("{}{}{}.XXXXXX", path, kTempTag, ::getpid());
  const int fd = mkstemp(tmp.data());
  LINEA_CHECK(fd >= 0, "[{}] cannot create a temp file beside '{}': {} ({})", op, path, std::strerror(errno), kept);
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("[{}] {} '{}' failed: {} ({})", op, what, tmp, std::strerror(err), kept));
  };
  if (::fchmod(fd, 0644) != 0) fail("chmod of");
  for (std::string_view part : parts) {
    while (!part.empty()) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("writing");
      part.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (::fsync(fd) != 0) fail("fsync of");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("[{}] closing '{}' failed: {} ({})", op, tmp, std::strerror(err), kept));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("[{}] renaming '{}' to '{}' failed: {} ({})", op, tmp, path, std::strerror(err), kept));
  }
  // Make the rename itself durable (best effort: some filesystems refuse to fsync a directory).
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

int remove_stale_temp_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const long pid = temp_file_pid(p.filename().string());
    // kill(pid, 0) probes without signalling: ESRCH means no such process. EPERM means one runs
    // (another user's): keep its file.
    std::error_code ignored;
    if (pid > 0 && it->is_regular_file(ignored) && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
        fs::remove(p, ignored))
      ++removed;
  }
  return removed;
}

}  // namespace linea
