// The strict parsers of linea's environment variables (tensor/env.h), which LINEA_HOST_CACHE_MB
// and LINEA_DIST_TIMEOUT go through: a value that is not a number in range is an error naming the
// variable, its value and what is allowed. The variables themselves: test_check.cpp runs
// linea-check with a bad LINEA_HOST_CACHE_MB, tests/dist/test_local.cpp calls dist::init() with a
// bad LINEA_DIST_TIMEOUT.
#include <cstdlib>

#include <linea/tensor/env.h>

#include "helpers.h"

using namespace linea;

namespace {
constexpr const char* kVar = "LINEA_TEST_ENV_VALUE";
}

TEST_CASE("env_number: unset or empty gives the fallback; a finite number in range is read") {
  ::unsetenv(kVar);
  CHECK(env_number(kVar, 300, 0.1, 1e6, "seconds") == 300);
  ::setenv(kVar, "", 1);
  CHECK(env_number(kVar, 300, 0.1, 1e6, "seconds") == 300);
  for (auto [text, value] : {std::pair{"0.1", 0.1}, {"2.5", 2.5}, {"1e6", 1e6}, {"  7", 7.0}}) {
    ::setenv(kVar, text, 1);
    CHECK(env_number(kVar, 300, 0.1, 1e6, "seconds") == value);
  }
  for (const char* bad : {"abc", "0", "-5", "1e-9", "nan", "inf", "-inf", "5s", "1e999", "1e7", " "}) {
    ::setenv(kVar, bad, 1);
    const std::string want = fmt::format("[env] {}='{}' is not allowed: expected a number of seconds from 0.1 to "
                                         "1000000 (or leave it unset)", kVar, bad);
    CHECK_THROWS_WITH_AS(env_number(kVar, 300, 0.1, 1e6, "seconds"), doctest::Contains(want.c_str()), Error);
  }
  ::unsetenv(kVar);
}

TEST_CASE("env_integer: whole numbers in range only") {
  ::setenv(kVar, "0", 1);
  CHECK(env_integer(kVar, 2048, 0, 1 << 20, "MiB") == 0);
  ::setenv(kVar, "1048576", 1);
  CHECK(env_integer(kVar, 2048, 0, 1 << 20, "MiB") == 1 << 20);
  for (const char* bad : {"abc", "-5", "1.5", "64MB", "1048577", "99999999999999999999", "1e3"}) {
    ::setenv(kVar, bad, 1);
    const std::string want =
        fmt::format("[env] {}='{}' is not allowed: expected a whole number of MiB from 0 to 1048576", kVar, bad);
    CHECK_THROWS_WITH_AS(env_integer(kVar, 2048, 0, 1 << 20, "MiB"), doctest::Contains(want.c_str()), Error);
  }
  ::unsetenv(kVar);
  CHECK(env_integer(kVar, 2048, 0, 1 << 20, "MiB") == 2048);
}
