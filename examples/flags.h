// Command-line flags for the examples (vit_fmnist, char_lm, mqar): a table of "--name value" flags,
// each bound to a member of the program's Config, that parses, prints back as one line (saved in
// checkpoints, so a resumed run rebuilds the same model) and lists itself for --help.
//
//   const std::vector<Flag<Config>> table = {flag("lr", &Config::lr, true, "peak learning rate", positive(1)), ...};
//   Config c = parse_flags("char_lm", table, args);   // throws "[char_lm] ..." naming the flag
//
// A number must be finite and inside its flag's Range (any finite value by default), so inf, nan
// and out-of-range values are refused while parsing, before anything runs.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <linea/linea.h>

namespace flags {

[[noreturn]] inline void fail(const std::string& program, const std::string& msg) {
  throw linea::Error("[" + program + "] " + msg);
}

// The values a numeric flag accepts: from min to max, each end included unless marked open.
struct Range {
  double min = std::numeric_limits<double>::lowest(), max = std::numeric_limits<double>::max();
  bool min_open = false, max_open = false;
  bool contains(double v) const { return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max); }
  std::string str() const {  // "> 0", ">= 0", "in (0, 1]"
    if (max == std::numeric_limits<double>::max()) return fmt::format("{} {}", min_open ? ">" : ">=", min);
    return fmt::format("in {}{}, {}{}", min_open ? '(' : '[', min, max, max_open ? ')' : ']');
  }
};
constexpr double kNoLimit = std::numeric_limits<double>::max();
inline Range positive(double max = kNoLimit) { return {.min = 0, .max = max, .min_open = true}; }  // (0, max]
inline Range at_least(double min, double max = kNoLimit) { return {.min = min, .max = max}; }     // [min, max]
inline Range below(double min, double max) { return {.min = min, .max = max, .max_open = true}; }  // [min, max)
inline Range open(double min, double max) {                                                         // (min, max)
  return {.min = min, .max = max, .min_open = true, .max_open = true};
}

template <class Config>
struct Flag {
  std::string name;  // without the leading "--"
  std::string help;
  bool saved;  // part of what a checkpoint records (the model and the recipe)
  std::function<void(Config&, const std::string& program, const std::string& value)> set;
  std::function<std::string(const Config&)> get;
};

namespace detail {
inline void parse_value(const std::string&, const std::string&, const std::string& s, std::string& out, const Range&) {
  out = s;
}
inline void parse_value(const std::string& program, const std::string& flag, const std::string& s, bool& out,
                        const Range&) {
  if (s != "on" && s != "off") fail(program, fmt::format("--{} takes on or off, got '{}'", flag, s));
  out = s == "on";
}
template <class T>  // numbers: the whole word must parse to a finite value inside the flag's range
void parse_value(const std::string& program, const std::string& flag, const std::string& s, T& out,
                 const Range& range) {
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_floating_point_v<T>) out = std::strtod(s.c_str(), &end);
  else if constexpr (std::is_signed_v<T>) out = std::strtoll(s.c_str(), &end, 10);
  else out = std::strtoull(s.c_str(), &end, 10);
  const bool negative_unsigned = std::is_unsigned_v<T> && s.starts_with('-');
  if (s.empty() || *end != '\0' || errno == ERANGE || negative_unsigned || !std::isfinite(static_cast<double>(out)))
    fail(program, fmt::format("--{} takes {}, got '{}'", flag,
                              std::is_floating_point_v<T> ? "a finite number"
                              : std::is_signed_v<T>       ? "an integer"
                                                          : "a non-negative integer",
                              s));
  if (!range.contains(static_cast<double>(out)))
    fail(program, fmt::format("--{} must be {}, got {}", flag, range.str(), s));
}
inline std::string show(const std::string& v) { return v; }
inline std::string show(bool v) { return v ? "on" : "off"; }
template <class T>
std::string show(T v) { return fmt::format("{}", v); }
}  // namespace detail

// `range` only applies to numbers.
template <class Config, class T>
Flag<Config> flag(std::string name, T Config::*member, bool saved, std::string help, Range range = {}) {
  return {name, std::move(help), saved,
          [name, member, range](Config& c, const std::string& program, const std::string& s) {
            detail::parse_value(program, name, s, c.*member, range);
          },
          [member](const Config& c) { return detail::show(c.*member); }};
}

// "--flag value" pairs applied over `base` (a checkpoint's config, say); no checks of the result.
template <class Config>
Config parse_flags(const std::string& program, const std::vector<Flag<Config>>& table,
                   const std::vector<std::string>& args, Config c = {}) {
  for (size_t i = 0; i < args.size(); i += 2) {
    const std::string& a = args[i];
    if (!a.starts_with("--")) fail(program, fmt::format("expected a --flag, got '{}' (see --help)", a));
    auto it = std::find_if(table.begin(), table.end(), [&](const Flag<Config>& f) { return "--" + f.name == a; });
    if (it == table.end()) fail(program, fmt::format("unknown flag '{}' (see --help)", a));
    if (i + 1 >= args.size()) fail(program, fmt::format("{} needs a value", a));
    if (args[i + 1].starts_with("--"))
      fail(program, fmt::format("{} needs a value, got the flag '{}'", a, args[i + 1]));
    it->set(c, program, args[i + 1]);
  }
  return c;
}

// The saved flags as one line, "--attn mhla --layers 4 ...": parse_flags of its words gives them back.
template <class Config>
std::string flags_line(const std::vector<Flag<Config>>& table, const Config& c) {
  std::string s;
  for (const Flag<Config>& f : table)
    if (f.saved) s += fmt::format("{}--{} {}", s.empty() ? "" : " ", f.name, f.get(c));
  return s;
}

// A resumed run's flags against its checkpoint's: a saved flag changes the run's numbers, so
// `resumed` may give it another value only when it is one of `may_change` (flags that leave the
// rows already written valid, e.g. "steps": a run may be extended); any other is an error naming
// it. Returns one note per flag that did change, "--steps 4 (the checkpoint's: 2)".
template <class Config>
std::vector<std::string> resume_changes(const std::string& program, const std::vector<Flag<Config>>& table,
                                        const Config& saved, const Config& resumed,
                                        const std::vector<std::string>& may_change) {
  std::vector<std::string> changed;
  for (const Flag<Config>& f : table) {
    if (!f.saved || f.get(resumed) == f.get(saved)) continue;
    if (std::find(may_change.begin(), may_change.end(), f.name) == may_change.end()) {
      std::string allowed;
      for (const std::string& m : may_change) allowed += (allowed.empty() ? "--" : ", --") + m;
      fail(program, fmt::format("--{} {}: the checkpoint was trained with --{} {}, and a resumed run keeps every flag "
                                "that changes its numbers (of those only {} may change): start a new run to change it",
                                f.name, f.get(resumed), f.name, f.get(saved), allowed));
    }
    changed.push_back(fmt::format("--{} {} (the checkpoint's: {})", f.name, f.get(resumed), f.get(saved)));
  }
  return changed;
}

// The value of `--device`: cpu or cuda. Asking for cuda where no GPU can run (a CPU-only build,
// no driver, no device) is an error that says so, not a crash at the first kernel.
inline linea::Device parse_device(const std::string& program, const std::string& name) {
  if (name == "cpu") return linea::Device::cpu();
  if (name != "cuda") fail(program, fmt::format("--device takes cpu or cuda, got '{}'", name));
  if (!linea::cuda::is_available())
    fail(program, "--device cuda: no usable CUDA device here (CPU-only build, no driver, or no GPU); use --device cpu");
  return linea::Device::cuda();
}

// --precision: how the run's float32 matmuls multiply (linea/tensor/precision.h), set for the
// whole process. bf16: bfloat16 dot products with float32 sums (AVX512-BF16 where the CPU has it,
// tensor cores on a GPU); parameters, optimizer state and every other op stay float32.
inline void set_precision(const std::string& program, const std::string& name) {
  if (name != "fp32" && name != "bf16") fail(program, fmt::format("--precision takes fp32 or bf16, got '{}'", name));
  linea::set_matmul_precision(name == "bf16" ? linea::MatmulPrecision::BF16 : linea::MatmulPrecision::Highest);
  if (name == "bf16" && !linea::cpu_has_bf16_dot())
    fmt::print("{}: --precision bf16: this CPU has no AVX512-BF16, so CPU matmuls round to bf16 but run on "
               "float32 FMAs, slower than fp32\n", program);
}

// Runs a program's main body and turns any exception into one line on stderr and exit status 1:
// bad input never aborts the program (exit 134) with an uncaught exception.
template <class Body>
int guarded_main(const std::string& program, Body&& body) {
  try {
    return body();
  } catch (const linea::Error& e) {  // already starts with "[op]"
    fmt::print(stderr, "{}\n", e.what());
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "[{}] out of memory\n", program);
  } catch (const std::exception& e) {  // the standard library's: filesystem, streams, conversions
    fmt::print(stderr, "[{}] {}\n", program, e.what());
  }
  return 1;
}

inline std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

template <class Config>
std::string usage(const std::string& program, const std::vector<Flag<Config>>& table);

// True when the arguments ask for --help, after printing the usage: main() then returns 0.
template <class Config>
bool help_requested(const std::string& program, const std::vector<Flag<Config>>& table,
                    const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") == args.end()) return false;
  fmt::print("{}", usage(program, table));
  return true;
}

template <class Config>
std::string usage(const std::string& program, const std::vector<Flag<Config>>& table) {
  const Config d;
  std::string s = fmt::format("usage: {} [--flag value ...]\n", program);
  for (const Flag<Config>& f : table) {
    const std::string def = f.get(d);
    s += fmt::format("  --{:<16} {}{}\n", f.name, f.help, def.empty() ? "" : fmt::format(" [{}]", def));
  }
  return s;
}

}  // namespace flags
