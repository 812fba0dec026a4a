#include "linea/tensor/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "linea/tensor/error.h"

namespace linea {

namespace {
[[noreturn]] void refuse(const char* name, const char* value, const std::string& allowed) {
  throw Error(fmt::format("[env] {}='{}' is not allowed: expected {} (or leave it unset)", name, value, allowed));
}
}  // namespace

double env_number(const char* name, double fallback, double lo, double hi, const char* what) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  // strtod also takes "nan", "inf" and hexadecimal; the range check turns those away.
  if (end == s || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi)
    refuse(name, s, fmt::format("a number of {} from {} to {}", what, lo, hi));
  return v;
}

int64_t env_integer(const char* name, int64_t fallback, int64_t lo, int64_t hi, const char* what) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    refuse(name, s, fmt::format("a whole number of {} from {} to {}", what, lo, hi));
  return v;
}

}  // namespace linea
