// Command-line flags for the examples (vit_fmnist, char_lm, mqar): a table of "--name value" flags,
// each bound to a member of the program's Config, that parses, prints back as one line (saved in
// checkpoints, so a resumed run rebuilds the same model) and lists itself for --help.
//
//   const std::vector<Flag<Config>> table = {flag("lr", &Config::lr, true, "peak learning rate"), ...};
//   Config c = parse_flags("char_lm", table, args);   // throws "[char_lm] ..." naming the flag
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
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

template <class Config>
struct Flag {
  std::string name;  // without the leading "--"
  std::string help;
  bool saved;  // part of what a checkpoint records (the model and the recipe)
  std::function<void(Config&, const std::string& program, const std::string& value)> set;
  std::function<std::string(const Config&)> get;
};

namespace detail {
inline void parse_value(const std::string&, const std::string&, const std::string& s, std::string& out) { out = s; }
inline void parse_value(const std::string& program, const std::string& flag, const std::string& s, bool& out) {
  if (s != "on" && s != "off") fail(program, fmt::format("--{} takes on or off, got '{}'", flag, s));
  out = s == "on";
}
template <class T>  // numbers: the whole word must parse, in range
void parse_value(const std::string& program, const std::string& flag, const std::string& s, T& out) {
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_floating_point_v<T>) out = std::strtod(s.c_str(), &end);
  else if constexpr (std::is_signed_v<T>) out = std::strtoll(s.c_str(), &end, 10);
  else out = std::strtoull(s.c_str(), &end, 10);
  const bool negative_unsigned = std::is_unsigned_v<T> && s.starts_with('-');
  if (s.empty() || *end != '\0' || errno == ERANGE || negative_unsigned)
    fail(program, fmt::format("--{} takes a{} number, got '{}'", flag, std::is_floating_point_v<T> ? "" : "n integer", s));
}
inline std::string show(const std::string& v) { return v; }
inline std::string show(bool v) { return v ? "on" : "off"; }
template <class T>
std::string show(T v) { return fmt::format("{}", v); }
}  // namespace detail

template <class Config, class T>
Flag<Config> flag(std::string name, T Config::*member, bool saved, std::string help) {
  return {name, std::move(help), saved,
          [name, member](Config& c, const std::string& program, const std::string& s) {
            detail::parse_value(program, name, s, c.*member);
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

// The value of `--device`: cpu or cuda. Asking for cuda where no GPU can run (a CPU-only build,
// no driver, no device) is an error that says so, not a crash at the first kernel.
inline linea::Device parse_device(const std::string& program, const std::string& name) {
  if (name == "cpu") return linea::Device::cpu();
  if (name != "cuda") fail(program, fmt::format("--device takes cpu or cuda, got '{}'", name));
  if (!linea::cuda::is_available())
    fail(program, "--device cuda: no usable CUDA device here (CPU-only build, no driver, or no GPU); use --device cpu");
  return linea::Device::cuda();
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
