// The checking machinery of check/ (what linea-check runs): a deliberately broken backward is
// caught and reported with its worst element, in the table and in JSON; device comparisons find
// their worst element; the registry's inputs have the layouts they claim; --op selects by name;
// the program's exit statuses. The registry itself is gradchecked by the ctest test
// check_gradcheck (linea-check gradcheck --op all).
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <sys/wait.h>

#include <linea/cuda/runtime.h>

#include "helpers.h"
#include "mhla_reference.h"
#include "report.h"

using namespace linea;
using namespace linea::check;

namespace {

// x², with a backward that is right everywhere except at element [1, 2], where it is `factor`
// times too large.
OpCase square(double factor) {
  auto f = [factor](const std::vector<Tensor>& x) {
    return custom_function(
        "square", {x[0]}, [](const std::vector<Tensor>& in) { return Forward{in[0] * in[0], {in[0]}}; },
        [factor](const std::vector<Tensor>& saved, const Tensor& g) {
          std::vector<double> w(12, 1.0);
          w[1 * 4 + 2] = factor;
          const Tensor wrong = from_vector(w, {3, 4}).to(g.dtype()).to(g.device());
          return std::vector<Tensor>{g * 2.0 * saved[0] * wrong};
        });
  };
  return {"square", {{3, 4}}, f};
}

// Runs linea-check with these arguments (after `env`, variable assignments for the shell); its
// exit status and stdout.
std::pair<int, std::string> run_cli(const std::string& args, const std::string& env = "") {
  std::string out;
  FILE* p = ::popen((env + " " + LINEA_CHECK_EXE + " " + args + " 2>/dev/null").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("a broken backward is reported with its worst element") {
  const Result good = gradcheck_case(square(1.0), Device::cpu(), 5);
  CHECK(good.status == Status::Pass);
  CHECK(good.worst.ratio < 1);

  const Result bad = gradcheck_case(square(1.5), Device::cpu(), 5);
  CHECK(bad.status == Status::Fail);
  CHECK(bad.worst.what == "input 0");
  CHECK(bad.worst.index == std::vector<int64_t>{1, 2});
  // analytic = 1.5 × numeric there, and the numeric value is the right gradient: good's analytic
  // at the same element, for the same inputs and weighting.
  CHECK(bad.worst.got == doctest::Approx(1.5 * bad.worst.want).epsilon(1e-6));
  CHECK(bad.worst.rel_error == doctest::Approx(0.5).epsilon(1e-5));
  CHECK(bad.worst.abs_error > 0);
  const std::string line = format_result(bad, "analytic", "numeric");
  INFO(line);
  CHECK(line.starts_with("FAIL"));
  CHECK(line.find("input 0 [1, 2]") != std::string::npos);
  CHECK(line.find("element [1, 2]") != std::string::npos);  // gradcheck's own message
  const std::string json = results_json("test", {good, bad});
  INFO(json);
  CHECK(json.find("\"status\": \"FAIL\"") != std::string::npos);
  CHECK(json.find("\"index\": [1, 2]") != std::string::npos);
  CHECK(json.find("\"passed\": 1, \"failed\": 1") != std::string::npos);
}

TEST_CASE("a case that throws is an ERROR with the message, not a crash") {
  OpCase bad{"bad shapes", {{3, 4}, {5}}, [](const std::vector<Tensor>& x) { return x[0] + x[1]; }};
  const Result r = gradcheck_case(bad, Device::cpu(), 1);
  CHECK(r.status == Status::Error);
  CHECK(r.message.find("[add]") != std::string::npos);
}

TEST_CASE("fold_worst finds the element furthest out of tolerance, NaN included") {
  const Tensor want = from_vector<double>({1, 2, 3, 4}, {2, 2});
  Worst w;
  CHECK(fold_worst(w, "output", want + 1e-9, want, 1e-6, 1e-6));
  CHECK(w.ratio < 1);
  const Tensor got = from_vector<double>({1, 2.5, 3, 4.1}, {2, 2});
  CHECK_FALSE(fold_worst(w, "grad of input 0", got, want, 1e-6, 1e-6));
  CHECK(w.what == "grad of input 0");
  CHECK(w.index == std::vector<int64_t>{0, 1});
  CHECK(w.got == 2.5);
  CHECK(w.want == 2);
  Worst n;
  CHECK_FALSE(fold_worst(n, "output", from_vector<double>({1, NAN, 3, 4}, {2, 2}), want, 1, 1));
  CHECK(n.index == std::vector<int64_t>{0, 1});
  Worst s;
  CHECK_FALSE(fold_worst(s, "output", want.view({4}), want, 1, 1));  // shapes differ
  CHECK(s.what.find(shape_str(Shape{4})) != std::string::npos);
}

TEST_CASE("the NaN check: an op that drops a NaN fails, naming where; relu and the registry's ops pass") {
  using V = const std::vector<Tensor>&;
  // relu as "x > 0 ? x : 0": a NaN compares false and comes out 0.
  const OpCase drops{"relu by where", {{3, 4}}, [](V x) {
    const Tensor zero = zeros_like(x[0]);
    return where(gt(x[0], zero), x[0], zero);
  }};
  const Result bad = nan_case(drops, Device::cpu(), DType::Float32, 7);
  CHECK(bad.status == Status::Fail);
  CHECK(bad.worst.got == 0);
  CHECK(bad.message.find("a NaN in input 0 at [") != std::string::npos);
  const OpCase keeps{"relu", {{3, 4}}, [](V x) { return relu(x[0]); }};
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Result good = nan_case(keeps, Device::cpu(), dt, 7);
    INFO(good.message);
    CHECK(good.status == Status::Pass);
    CHECK(good.worst.want == 3);  // first, middle and last element: each moves its own output only
    CHECK(good.worst.got == 3);
  }
  // Nothing to check where the output is bool; a marked condition input is skipped.
  const OpCase cmp{"gt", {{3, 4}}, [](V x) { return gt(x[0], zeros_like(x[0])); }, Tol::Elementwise, false};
  CHECK(nan_case(cmp, Device::cpu(), DType::Float32, 7).status == Status::Pass);
  const OpCase marked = nan_stops_at({0}, drops);
  CHECK(nan_case(marked, Device::cpu(), DType::Float32, 7).status == Status::Pass);
  for (const char* op : {"relu", "softplus", "clamp", "maximum", "max dims [1]", "linear_attention N=10 relu, strided"})
    for (const OpCase* c : select_cases(op)) {
      const Result r = nan_case(*c, Device::cpu(), DType::Float32, 11);
      CHECK_MESSAGE(r.status == Status::Pass, c->name, ": ", r.message);
    }
}

TEST_CASE("make_inputs pokes one element of a laid-out input, wherever it lies in memory") {
  const OpCase c{"layouts", {transposed({3, 4}), strided({2, 5})}, [](const std::vector<Tensor>& x) { return x[0]; }};
  const std::vector<Tensor> xs = make_inputs(c, DType::Float64, Device::cpu(), 3, false);
  for (size_t i = 0; i < 2; ++i) {
    const Poke p{i, 6, 42.0};
    const std::vector<Tensor> ys = make_inputs(c, DType::Float64, Device::cpu(), 3, false, &p);
    std::vector<double> want = xs[i].to_vector();
    want[6] = 42.0;
    CHECK(ys[i].to_vector() == want);
    CHECK(ys[i].strides() == xs[i].strides());
    CHECK(ys[1 - i].to_vector() == xs[1 - i].to_vector());
  }
}

TEST_CASE("registry inputs: the layouts, dtypes and grads each case asks for") {
  const OpCase c{"layouts", {{2, 3}, transposed({3, 4}), strided({2, 5}), constant({2})},
                 [](const std::vector<Tensor>& x) { return x[0]; }};
  const std::vector<Tensor> xs = make_inputs(c, DType::Float64, Device::cpu(), 3, true);
  REQUIRE(xs.size() == 4);
  CHECK(xs[0].is_contiguous());
  CHECK(xs[1].shape() == Shape{3, 4});
  CHECK_FALSE(xs[1].is_contiguous());
  CHECK(xs[2].shape() == Shape{2, 5});
  CHECK(xs[2].strides() == std::vector<int64_t>{10, 2});
  for (int i = 0; i < 3; ++i) CHECK((xs[i].requires_grad() && xs[i].is_leaf()));
  CHECK_FALSE(xs[3].requires_grad());
  for (const Tensor& x : xs) CHECK(x.dtype() == DType::Float64);
  // The same seed gives the same numbers, in float32 too.
  const auto again = make_inputs(c, DType::Float32, Device::cpu(), 3, false);
  CHECK_FALSE(again[1].requires_grad());
  CHECK(linea::testing::allclose(again[1].to(DType::Float64), xs[1].detach(), 1e-6, 1e-6));
}

TEST_CASE("--op selects a case by name and the cases named after it; names are unique") {
  const auto max_cases = select_cases("max");
  CHECK(!max_cases.empty());
  for (const OpCase* c : max_cases) CHECK((c->name == "max" || c->name.starts_with("max ")));
  CHECK(select_cases("all").size() == registry().size());
  CHECK(select_cases("no such op").empty());
  CHECK(select_cases("").empty());
  CHECK(select_cases("softmax dim 0").size() == 2);  // and "softmax dim 0 transposed"
  CHECK(select_cases("softmax dim 0 transposed").size() == 1);
  // MHLA's two differentiable forms, the norms and the losses are all registered.
  for (const char* op : {"mhla", "mhla causal", "mhla_composite", "layer_norm", "rms_norm", "cross_entropy", "mse_loss"})
    CHECK_MESSAGE(!select_cases(op).empty(), op);
}

TEST_CASE("the quadratic MHLA reference is the fused op (non-causal and causal, padded)") {
  namespace F = nn::functional;
  Generator g(4);
  const Tensor q = randn({1, 2, 7, 3}, g, DType::Float64), k = randn({1, 2, 7, 3}, g, DType::Float64);
  const Tensor v = randn({1, 2, 7, 2}, g, DType::Float64), mix = rand({3, 3}, g, DType::Float64) + 0.1;
  for (bool causal : {false, true}) {
    const F::MHLAOptions o{.causal = causal, .block_len = 3, .feature_map = F::FeatureMap::Elu1};
    Worst w;
    CHECK(fold_worst(w, "output", F::mhla(q, k, v, mix, o), mhla_quadratic(q, k, v, mix, o), 1e-12, 1e-10));
  }
}

TEST_CASE("linea-check gradcheck --order 2: double backward checked, unsupported ops skipped with the reason") {
  int rc = 0;
  std::string out;
  std::tie(rc, out) = run_cli("gradcheck --order 2 --op tanh --json");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("\"passed\": 2, \"failed\": 0, \"skipped\": 0") != std::string::npos);  // and transposed
  std::tie(rc, out) = run_cli("gradcheck --order 2 --op gelu");
  INFO(out);
  CHECK(rc == 0);  // a skip is not a failure
  CHECK(out.find("skip") != std::string::npos);
  CHECK(out.find("create_graph through gelu: not supported yet") != std::string::npos);
  CHECK(out.find("0 passed") != std::string::npos);
}

TEST_CASE("linea-check: exit statuses and --json") {
  // std::tie, not structured bindings: INFO is a lambda, and clang < 16 cannot capture a binding.
  int rc = 0;
  std::string out;
  std::tie(rc, out) = run_cli("gradcheck --op 'log_softmax dim 0' --json");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("\"passed\": 2, \"failed\": 0") != std::string::npos);  // dim 0 and dim 0, transposed
  CHECK(run_cli("gradcheck --op 'no such op'").first == 2);
  CHECK(run_cli("gradcheck --op ''").first == 2);  // an empty name is not "every case"
  CHECK(run_cli("nan --op ''").first == 2);
  CHECK(run_cli("nan --op relu --dtype float16").first == 2);
  std::tie(rc, out) = run_cli("nan --op relu");
  CHECK(rc == 0);
  CHECK(out.find("nan: 4 checked, 4 passed") != std::string::npos);  // 2 cases, float32 and float64
  CHECK(run_cli("gradcheck --dtype float32").first == 2);
  CHECK(run_cli("gradcheck --order 3").first == 2);
  CHECK(run_cli("nan --order 2").first == 2);
  CHECK(run_cli("frobnicate").first == 2);
  int crc = 0;
  std::string cout_;
  std::tie(crc, cout_) = run_cli("compare --device cuda --op neg");
  INFO(cout_);
  if (cuda::is_available()) {
    CHECK(crc == 0);
  } else {
    CHECK(crc == 77);
    CHECK(cout_.find("SKIPPED cuda") != std::string::npos);
  }
  // A malformed LINEA_HOST_CACHE_MB is refused at the first allocation: no silent fallback to the
  // default, and "-5" does not wrap around to an unlimited cache.
  for (const char* bad : {"abc", "-5", "64MB"}) {
    std::tie(rc, out) = run_cli("gradcheck --op relu", fmt::format("LINEA_HOST_CACHE_MB='{}'", bad));
    CHECK(rc == 1);
    CHECK(out.find(fmt::format("[env] LINEA_HOST_CACHE_MB='{}' is not allowed: expected a whole number of MiB", bad)) !=
          std::string::npos);
  }
  CHECK(run_cli("gradcheck --op relu", "LINEA_HOST_CACHE_MB=0").first == 0);
  auto [hrc, help] = run_cli("--help");
  CHECK(hrc == 0);
  CHECK(help.find("77") != std::string::npos);
}
