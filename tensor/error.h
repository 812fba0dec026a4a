// linea::Error — the one exception type the library throws. Messages start with "[op]" and
// name the shapes / dtypes / devices involved, so a user can see what went wrong where.
#pragma once
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace linea {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace linea

// LINEA_CHECK(cond, "[op] fmt string {}", args...) throws linea::Error when cond is false.
#define LINEA_CHECK(cond, ...)                                  \
  do {                                                          \
    if (!(cond)) throw ::linea::Error(fmt::format(__VA_ARGS__)); \
  } while (0)
