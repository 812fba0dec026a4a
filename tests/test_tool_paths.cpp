// Where the examples read and write (examples/data): output locations are checked, and created,
// before any work, with one-line errors naming the flag; LINEA_DATA_DIR is checked where it is read.
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "data/output_paths.h"
#include "data/text.h"
#include "helpers.h"

using namespace linea;
namespace fs = std::filesystem;

namespace {

bool empty_dir(const fs::path& d) { return fs::is_directory(d) && fs::is_empty(d); }

// Sets an environment variable for a scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("make_output_dir: creates the folder, or says why it cannot, leaving nothing behind") {
  testing::TempDir tmp("tool_paths");
  data::make_output_dir("lab", "--out", tmp.file("a/b"));
  CHECK(empty_dir(tmp.file("a/b")));  // the write probe is gone
  data::make_output_dir("lab", "--out", tmp.file("a/b"));  // an existing folder is fine
  testing::write_bytes(tmp.file("f"), "x");
  const std::string file = tmp.file("f");
  CHECK_THROWS_WITH_AS(data::make_output_dir("lab", "--out", file), doctest::Contains("exists and is not a directory"),
                       Error);
  CHECK_THROWS_WITH_AS(data::make_output_dir("lab", "--out", file + "/sub"),
                       doctest::Contains(("[lab] --out '" + file + "/sub': cannot create").c_str()), Error);
  CHECK_THROWS_WITH_AS(data::make_output_dir("lab", "--out", "/proc/linea_nope"), doctest::Contains("cannot create"),
                       Error);
}

TEST_CASE("check_output_file: a file name in a folder that takes files; the file itself is not written") {
  testing::TempDir tmp("tool_paths");
  data::check_output_file("mqar", "--csv", tmp.file("runs/results.csv"));
  CHECK(empty_dir(tmp.file("runs")));  // the folder is made, no file and no temp file in it
  CHECK_THROWS_WITH_AS(data::check_output_file("mqar", "--csv", tmp.file("runs")),
                       doctest::Contains("is a directory, not a file name"), Error);
  CHECK_THROWS_WITH_AS(data::check_output_file("mqar", "--csv", tmp.file("new/")),
                       doctest::Contains("is a directory, not a file name"), Error);
  CHECK(!fs::exists(tmp.file("new")));
  CHECK_THROWS_WITH_AS(data::check_output_file("mqar", "--csv", ""), doctest::Contains("[mqar] --csv '' is empty"),
                       Error);
  // /proc exists and looks writable to root, but takes no new files.
  CHECK_THROWS_WITH_AS(data::check_output_file("mqar", "--csv", "/proc/linea.csv"),
                       doctest::Contains("[mqar] --csv '/proc/linea.csv': cannot write in '/proc'"), Error);
}

TEST_CASE("default_corpus_path: LINEA_DATA_DIR must name a directory; unset or empty means the source tree's") {
  testing::TempDir tmp("tool_paths");
  {
    ScopedEnv env("LINEA_DATA_DIR", tmp.dir.string());
    CHECK(data::default_corpus_path() == tmp.file("kjv.txt"));
  }
  {
    ScopedEnv env("LINEA_DATA_DIR", tmp.file("absent"));
    CHECK_THROWS_WITH_AS(data::default_corpus_path(), doctest::Contains("[LINEA_DATA_DIR] '"), Error);
  }
  testing::write_bytes(tmp.file("kjv.txt"), "text");
  {
    ScopedEnv env("LINEA_DATA_DIR", tmp.file("kjv.txt"));  // the file, not its folder
    CHECK_THROWS_WITH_AS(data::default_corpus_path(), doctest::Contains("is not a directory"), Error);
  }
  {
    ScopedEnv env("LINEA_DATA_DIR", "");
    CHECK(fs::path(data::default_corpus_path()).filename() == "kjv.txt");
  }
}
