// Reading linea's environment variables strictly: a value that is not a number in the allowed
// range throws a linea::Error naming the variable, its value and what is allowed, instead of
// falling back to a default or passing on a value that breaks later (a timeout of 0, a cache size
// that wraps around). Unset or empty: `fallback`. LINEA_CPU_ISA, a name, is parsed by cpu_isa.cpp.
#pragma once
#include <cstdint>

namespace linea {

// A finite decimal number in [lo, hi]; `what` says what it counts ("seconds").
double env_number(const char* name, double fallback, double lo, double hi, const char* what);
// A whole number in [lo, hi].
int64_t env_integer(const char* name, int64_t fallback, int64_t lo, int64_t hi, const char* what);

}  // namespace linea
