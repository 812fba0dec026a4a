// linea-check: every registered op (check/registry.h) checked numerically from one command.
// Run `linea-check --help` for the commands, flags and exit statuses.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <linea/cuda/runtime.h>

#include "mhla_check.h"
#include "registry.h"
#include "report.h"
#include "linea/tensor/error.h"

using namespace linea;
using namespace linea::check;

namespace {

constexpr int kPassed = 0, kFailed = 1, kUsage = 2, kSkipped = 77;

const char* kHelp = R"(linea-check: check linea's ops numerically, from the op registry (check/registry.h).

usage:
  linea-check gradcheck [--op NAME|all] [--device cpu|cuda|all] [--dtype float64] [--order 1|2] [--json]
      float64 central differences against the analytic backward of every differentiable case.
      Per case: pass/FAIL, the worst element (input, index, analytic, numeric, abs/rel error), time.
      --order 2 checks the double backward (gradgradcheck): central differences of the first
      gradient, computed with create_graph, against its backward. A case whose op cannot record
      its backward yet is "skip", with autograd::grad's error naming the op; skips do not fail.
  linea-check compare [--op NAME|all] [--device cuda] [--dtype float32|float64|all] [--json]
      every case's output and input gradients on the device against the CPU, from identical
      inputs (float32 and float64 by default), with the worst element per case.
  linea-check nan [--op NAME|all] [--device cpu|cuda|all] [--dtype float32|float64|all] [--json]
      NaN propagation, as in PyTorch: a NaN put into an input (its first, middle and last element)
      must turn NaN every output element that depends on that element. Float32 and float64 by
      default; cases with integer or bool outputs pass with nothing to check.
  linea-check mhla [--device cpu|cuda] [--json]
      MHLA's fused, composite and (causal) streaming forms against a brute-force quadratic
      reference: outputs and the gradients of q, k, v and mix, float64, N not divisible by the
      block length, M = 1, d != dv, every feature map.
  linea-check list [--op NAME]
      the registered cases, with their input shapes.

  --op NAME   the case NAME and every case named "NAME ..." (e.g. --op softmax); default all
  --json      one JSON document on stdout instead of the table


exit status:
  0   every check that ran passed
  1   a check failed or threw (the output names it and its worst element)
  2   bad usage (unknown command, flag, value or op name)
  77  skipped: a requested device is not available (no GPU, or a CPU-only build); the checks that
      could run all passed. With --device all the CPU part still runs.
)";

struct Args {
  std::string command, op = "all", device, dtype, order;
  bool json = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "linea-check: %s (see linea-check --help)\n", msg.c_str());
  std::exit(kUsage);
}

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& s : args)
    if (s == "--help" || s == "-h") {
      std::fputs(kHelp, stdout);
      std::exit(kPassed);
    }
  if (args.empty()) usage_error("no command given");
  a.command = args[0];
  if (a.command != "gradcheck" && a.command != "compare" && a.command != "nan" && a.command != "mhla" &&
      a.command != "list")
    usage_error("unknown command '" + a.command + "'");
  std::map<std::string, std::string*> valued = {{"--op", &a.op}, {"--device", &a.device}, {"--dtype", &a.dtype},
                                                  {"--order", &a.order}};
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json") {
      a.json = true;
    } else if (auto it = valued.find(args[i]); it != valued.end()) {
      if (i + 1 >= args.size()) usage_error(args[i] + " needs a value");
      *it->second = args[++i];
      if (it->second->empty()) usage_error(args[i - 1] + " needs a value, got ''");
    } else {
      usage_error("unknown argument '" + args[i] + "'");
    }
  }
  auto allow = [&](const std::string& flag, const std::string& value, std::vector<std::string> ok) {
    if (value.empty() || std::find(ok.begin(), ok.end(), value) != ok.end()) return;
    usage_error(fmt::format("{} {} is not one of {} for '{}'", flag, value, fmt::join(ok, ", "), a.command));
  };
  if (a.command == "gradcheck") {
    allow("--device", a.device, {"cpu", "cuda", "all"});
    allow("--dtype", a.dtype, {"float64"});  // central differences need float64
    allow("--order", a.order, {"1", "2"});
  } else if (a.command == "compare") {
    allow("--device", a.device, {"cuda"});  // the CPU is the reference
    allow("--dtype", a.dtype, {"float32", "float64", "all"});
  } else if (a.command == "nan") {
    allow("--device", a.device, {"cpu", "cuda", "all"});
    allow("--dtype", a.dtype, {"float32", "float64", "all"});
  } else if (a.command == "mhla") {
    allow("--device", a.device, {"cpu", "cuda"});
    if (!a.dtype.empty()) usage_error("mhla runs in float64 only; it takes no --dtype");
  } else if (!a.device.empty() || !a.dtype.empty()) {
    usage_error("list takes only --op");
  }
  if (!a.order.empty() && a.command != "gradcheck") usage_error("--order is a gradcheck flag");
  return a;
}

// The devices asked for that exist here; the ones that do not are reported as skipped.
std::vector<Device> devices(const std::string& which, bool json, bool& skipped) {
  std::vector<Device> out;
  if (which == "cpu" || which == "all") out.push_back(Device::cpu());
  if (which == "cuda" || which == "all") {
    if (cuda::is_available()) {
      out.push_back(Device::cuda());
    } else {
      skipped = true;
      std::fprintf(json ? stderr : stdout,
                   "SKIPPED cuda: no CUDA device here (CPU-only build, no driver, or no GPU); nothing ran on it\n");
    }
  }
  return out;
}

// --dtype's value: one dtype, or float32 and float64 for "all" and by default.
std::vector<DType> dtypes(const std::string& which) {
  if (which == "float32") return {DType::Float32};
  if (which == "float64") return {DType::Float64};
  return {DType::Float32, DType::Float64};
}

size_t position(const OpCase* c) { return static_cast<size_t>(c - registry().data()); }

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::vector<const OpCase*> cases;
  try {
    cases = select_cases(a.op);
  } catch (const Error& e) {  // a malformed registry entry
    std::fprintf(stderr, "linea-check: %s\n", e.what());
    return kFailed;
  }
  if (cases.empty()) usage_error("no registered op case is named '" + a.op + "' (linea-check list shows them)");

  if (a.command == "list") {
    for (const OpCase* c : cases) {
      std::vector<std::string> shapes;
      for (const Input& in : c->inputs)
        shapes.push_back(shape_str(in.shape) + (in.layout == Layout::Transposed ? " transposed"
                                                : in.layout == Layout::Strided  ? " strided"
                                                                                : "") +
                         (in.requires_grad ? "" : " constant"));
      std::printf("%-56s %s%s\n", c->name.c_str(), fmt::format("{}", fmt::join(shapes, ", ")).c_str(),
                  c->differentiable ? "" : "  (no gradient)");
    }
    std::printf("%zu cases\n", cases.size());
    return kPassed;
  }

  bool skipped = false;
  const std::vector<Device> devs =
      devices(a.device.empty() ? (a.command == "compare" ? "cuda" : "cpu") : a.device, a.json, skipped);
  std::vector<Result> results;
  std::string got = "analytic", want = "numeric";
  auto add = [&](Result r) {
    if (!a.json) std::printf("%s\n", format_result(r, got, want).c_str()), std::fflush(stdout);
    results.push_back(std::move(r));
  };
  for (Device d : devs) {
    if (a.command == "gradcheck") {
      for (const OpCase* c : cases)
        if (c->differentiable)
          add(a.order == "2" ? gradgradcheck_case(*c, d, case_seed(position(c)))
                             : gradcheck_case(*c, d, case_seed(position(c))));
    } else if (a.command == "compare") {
      got = d.str(), want = "cpu";
      for (DType dt : dtypes(a.dtype))
        for (const OpCase* c : cases) add(compare_case(*c, d, dt, case_seed(position(c))));
    } else if (a.command == "nan") {
      got = "NaN", want = "of";
      for (DType dt : dtypes(a.dtype))
        for (const OpCase* c : cases) add(nan_case(*c, d, dt, case_seed(position(c))));
    } else {
      got = "form", want = "quadratic";
      for (Result& r : check_mhla(d)) add(std::move(r));
    }
  }

  int failed = 0, skips = 0;
  double seconds = 0;
  for (const Result& r : results)
    failed += r.status == Status::Fail || r.status == Status::Error, skips += r.status == Status::Skipped,
        seconds += r.seconds;
  if (a.json) {
    std::string cmd = "linea-check";
    for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
    std::fputs(results_json(cmd, results).c_str(), stdout);
  } else {
    std::printf("%s%s: %zu checked, %zu passed, %d skipped, %d failed, %.2f s%s\n", a.command.c_str(),
                a.order == "2" ? " --order 2" : "", results.size(), results.size() - failed - skips, skips, failed,
                seconds, skipped ? " (cuda skipped)" : "");
  }
  if (failed) return kFailed;
  return skipped ? kSkipped : kPassed;
}
