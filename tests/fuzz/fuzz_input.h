// What every fuzz harness shares: the loaders take paths, so each input is written to a file
// (in /dev/shm when there is one: no disk I/O per run), and a loader may fail only with a
// linea::Error. Any other exception escapes to libFuzzer, which reports it as a crash.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <linea/linea.h>

namespace linea::fuzz {

// A file of this process, removed at exit; `tag` keeps two files of one harness apart.
class InputFile {
 public:
  explicit InputFile(const std::string& tag) {
    const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::getenv("TMPDIR");
    path_ = fmt::format("{}/linea_fuzz_{}_{}", dir ? dir : "/tmp", ::getpid(), tag);
  }
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& write(const uint8_t* data, size_t size) const {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();  // the harness's own failure, not the parser's
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A property of a successful load does not hold: a silent wrong answer, reported as a crash.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

// The raw bytes of a tensor in C order.
inline std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return {static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * itemsize(c.dtype())};
}

}  // namespace linea::fuzz
