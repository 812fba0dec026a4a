#include "report.h"

#include <cmath>

#include "linea/tensor/error.h"
#include "linea/tensor/json.h"

namespace linea::check {

const char* status_name(Status s) {
  switch (s) {
    case Status::Pass: return "pass";
    case Status::Fail: return "FAIL";
    case Status::Error: return "ERROR";
    case Status::Skipped: return "skip";
  }
  return "?";
}

std::string format_result(const Result& r, const std::string& got_label, const std::string& want_label) {
  const Worst& w = r.worst;
  std::string worst = "(no elements)";
  if (!w.what.empty())
    worst = fmt::format("{} [{}]: {} {:.9g} {} {:.9g}, abs {:.2e} rel {:.2e}", w.what, fmt::join(w.index, ", "),
                        got_label, w.got, want_label, w.want, w.abs_error, w.rel_error);
  std::string line = fmt::format("{:<5} {:<52} {:<7} {:<6}  {}  {:.1f} ms", status_name(r.status), r.name, r.dtype,
                                 r.device, worst, r.seconds * 1e3);
  if (!r.message.empty()) line += "\n      " + r.message;
  return line;
}

namespace {
// JSON has no inf / nan: those become null.
std::string number(double x) { return std::isfinite(x) ? fmt::format("{:.17g}", x) : "null"; }
}  // namespace

std::string results_json(const std::string& command, const std::vector<Result>& results) {
  std::string out = fmt::format("{{\"command\": {}, \"results\": [", json::quote(command));
  int passed = 0, skipped = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const Worst& w = r.worst;
    passed += r.status == Status::Pass;
    skipped += r.status == Status::Skipped;
    out += fmt::format(
        "{}\n  {{\"name\": {}, \"device\": {}, \"dtype\": {}, \"status\": {}, \"seconds\": {}, \"message\": {}, "
        "\"worst\": {{\"what\": {}, \"index\": [{}], \"got\": {}, \"want\": {}, \"abs_error\": {}, \"rel_error\": {}}}}}",
        i ? "," : "", json::quote(r.name), json::quote(r.device), json::quote(r.dtype),
        json::quote(status_name(r.status)), number(r.seconds), json::quote(r.message), json::quote(w.what),
        fmt::join(w.index, ", "), number(w.got), number(w.want), number(w.abs_error), number(w.rel_error));
  }
  out += fmt::format("\n], \"passed\": {}, \"failed\": {}, \"skipped\": {}}}\n", passed,
                     static_cast<int>(results.size()) - passed - skipped, skipped);
  return out;
}

}  // namespace linea::check
