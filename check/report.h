// How `linea-check` prints results: one aligned line per case (status, name, worst element,
// time) and a summary, or one JSON document for machines.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "run.h"

namespace linea::check {

const char* status_name(Status s);  // "pass", "FAIL", "ERROR", "skip"

// One line: status, name, dtype/device, worst element (which tensor, index, got vs want, abs and
// rel error), milliseconds; a second, indented line with the message on FAIL / ERROR.
std::string format_result(const Result& r, const std::string& got_label, const std::string& want_label);

// {"command": ..., "results": [{"name", "device", "dtype", "status", "seconds", "message",
//  "worst": {"what", "index", "got", "want", "abs_error", "rel_error"}}, ...], "passed", "failed"}
std::string results_json(const std::string& command, const std::vector<Result>& results);

}  // namespace linea::check
