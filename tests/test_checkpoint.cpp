// Checkpoints: bitwise round trips for every dtype, optimizer state and resume, atomic writes,
// hostile/truncated/corrupted files, state_dict key errors, and a cross-check against Python's
// `safetensors` (skipped with a message when python3 lacks numpy or safetensors).
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "helpers.h"

using namespace linea;
using linea::testing::read_bytes;
using linea::testing::write_bytes;
using linea::testing::randn64;
namespace fs = std::filesystem;

namespace {


// The raw bytes of a tensor in C order.
std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * itemsize(c.dtype()));
}

// A file with the given header text (not padded) and `data` bytes of zeros.
std::string raw_file(const std::string& header, size_t data = 0) {
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + std::string(data, '\0');
}

// Tensors of every dtype, with the values that a lossy format would get wrong.
nn::StateDict every_dtype() {
  const float finf = std::numeric_limits<float>::infinity();
  const double dinf = std::numeric_limits<double>::infinity();
  std::vector<uint8_t> u8(256);
  for (int i = 0; i < 256; ++i) u8[i] = static_cast<uint8_t>(i);
  return {
      {"f32", from_vector<float>({0.0f, -0.0f, 1.5f, finf, -finf, std::nanf(""), 1e-45f, 3.4e38f}, {2, 4})},
      {"f64", from_vector<double>({0.0, -0.0, 1.0 / 3, dinf, -dinf, std::nan(""), 5e-324, 1.7e308}, {8})},
      {"i64", from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0, 1,
                                    std::numeric_limits<int64_t>::max()})},
      {"u8", from_vector(u8, {16, 16})},
      {"bool", gt(randn64({3, 5}, 1, false), scalar(0.0, float64))},
      {"layer.0.weight", randn64({4, 3}, 2, false).t()},  // a non-contiguous view: saved in C order
      {"scalar", scalar(3.25, float64)},
      {"empty", zeros({0, 3})},
  };
}

void check_same(const nn::StateDict& got, const nn::StateDict& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& entry : want) {  // not [name, t]: clang < 16 cannot CAPTURE a structured binding
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    CAPTURE(name);
    REQUIRE(got.count(name));
    const Tensor& g = got.at(name);
    CHECK(g.shape() == t.shape());
    CHECK(g.dtype() == t.dtype());
    CHECK(bytes_of(g) == bytes_of(t));
  }
}

// A small model with a buffer, trained by a regression loss.
struct Net : nn::Module {
  Tensor w, b, seen;
  explicit Net(uint64_t seed) : nn::Module("Net") {
    w = register_parameter("w", randn64({4, 3}, seed, false));
    b = register_parameter("b", randn64({3}, seed + 1, false));
    seen = register_buffer("seen", zeros({1}, int64));
  }
};

void train_step(Net& net, nn::Optimizer& opt) {
  Tensor x = randn64({5, 4}, 100, false), y = randn64({5, 3}, 101, false);
  opt.zero_grad();
  nn::mse_loss(matmul(x, net.w) + net.b, y).backward();
  opt.step();
}

}  // namespace

TEST_CASE("safetensors round trip is bitwise exact for every dtype, with metadata") {
  testing::TempDir tmp("checkpoint");
  const std::string path = tmp.file("all.safetensors");
  const nn::StateDict want = every_dtype();
  const nn::Metadata meta{{"step", "12"}, {"quote\" and\nnewline", "back\\slash \t \x01 ünïcødé"}, {"", ""}};
  nn::save_safetensors(path, want, meta);
  nn::Safetensors got = nn::load_safetensors(path);
  check_same(got.tensors, want);
  CHECK(got.metadata == meta);

  // The layout: u64 header length (a multiple of 8), a JSON object, then the data, tensors sorted
  // by name and packed back to back.
  const std::string raw = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(raw[8] == '{');
  size_t data = 0;
  for (const auto& [_, t] : want) data += t.numel() * itemsize(t.dtype());
  CHECK(raw.size() == 8 + n + data);
  const std::string header = raw.substr(8, n);
  CHECK(header.find("\"bool\":{\"dtype\":\"BOOL\",\"shape\":[3,5],\"data_offsets\":[0,15]}") != std::string::npos);
  CHECK(header.find("\"scalar\":{\"dtype\":\"F64\",\"shape\":[]") != std::string::npos);

  // Saving again replaces the file.
  nn::save_safetensors(path, {{"only", ones({2})}});
  CHECK(nn::load_safetensors(path).tensors.size() == 1);
  CHECK(nn::load_safetensors(path).metadata.empty());
}

TEST_CASE("checkpoint: optimizer state round trip, and a resumed run takes the identical next step") {
  testing::TempDir tmp("checkpoint");
  const std::string path = tmp.file("ckpt.safetensors");
  for (bool adam : {true, false}) {
    CAPTURE(adam);
    auto make_opt = [&](Net& net) -> std::unique_ptr<nn::Optimizer> {
      if (adam) return std::make_unique<nn::AdamW>(nn::adamw_param_groups(net, 0.1), nn::AdamWOptions{.lr = 0.01});
      return std::make_unique<nn::SGD>(net.named_parameters(), nn::SGDOptions{.lr = 0.01, .momentum = 0.9});
    };
    auto run = std::make_shared<Net>(1);
    auto opt = make_opt(*run);
    train_step(*run, *opt);
    train_step(*run, *opt);
    opt->set_lr(0.005);
    run->seen.data<int64_t>()[0] = 2;
    nn::save_checkpoint(path, *run, *opt, {{"step", "2"}});
    const nn::Safetensors file = nn::load_safetensors(path);
    CHECK(file.tensors.count("model.w"));
    CHECK(file.tensors.count("model.seen"));
    CHECK(file.tensors.count("optim.param_groups.0.lr"));
    CHECK(file.tensors.count(adam ? "optim.w.exp_avg_sq" : "optim.w.momentum_buffer"));
    train_step(*run, *opt);

    auto resumed = std::make_shared<Net>(50);  // different initial weights, all overwritten
    auto opt2 = make_opt(*resumed);
    CHECK(nn::load_checkpoint(path, *resumed, *opt2) == nn::Metadata{{"step", "2"}});
    CHECK(resumed->seen.item() == 2);
    CHECK(*opt2->param_groups()[0].lr == 0.005);
    nn::StateDict saved_optim;
    for (auto& [k, t] : file.tensors)
      if (k.starts_with("optim.")) saved_optim.emplace(k.substr(6), t);
    check_same(opt2->state_dict(), saved_optim);
    train_step(*resumed, *opt2);
    CHECK(bytes_of(resumed->w) == bytes_of(run->w));  // bit for bit
    CHECK(bytes_of(resumed->b) == bytes_of(run->b));
  }
}

TEST_CASE("load_checkpoint: missing, mis-shaped and foreign keys give clear errors") {
  testing::TempDir tmp("checkpoint");
  auto net = std::make_shared<Net>(1);
  nn::AdamW opt(net->named_parameters());
  train_step(*net, opt);
  const std::string path = tmp.file("ckpt.safetensors"), bad = tmp.file("bad.safetensors");
  nn::save_checkpoint(path, *net, opt);
  const nn::StateDict good = nn::load_safetensors(path).tensors;
  auto load_modified = [&](const std::function<void(nn::StateDict&)>& edit) {
    nn::StateDict sd = good;
    edit(sd);
    nn::save_safetensors(bad, sd);
    auto fresh = std::make_shared<Net>(2);
    nn::AdamW fresh_opt(fresh->named_parameters());
    nn::load_checkpoint(bad, *fresh, fresh_opt);
  };
  CHECK_THROWS_WITH_AS(load_modified([](nn::StateDict& sd) { sd.erase("model.b"); }),
                       doctest::Contains("missing key 'b'"), Error);
  CHECK_THROWS_WITH_AS(load_modified([](nn::StateDict& sd) { sd.erase("model.b"); }),
                       doctest::Contains(("[load_checkpoint] '" + bad + "'").c_str()), Error);
  CHECK_THROWS_WITH_AS(load_modified([](nn::StateDict& sd) { sd["model.w"] = zeros({3, 4}, float64); }),
                       doctest::Contains("'w': expected (4, 3) float64, got (3, 4) float64"), Error);
  CHECK_THROWS_WITH_AS(load_modified([](nn::StateDict& sd) { sd.erase("optim.w.exp_avg"); }),
                       doctest::Contains("[AdamW.load_state_dict] missing key 'w.exp_avg'"), Error);
  CHECK_THROWS_WITH_AS(load_modified([](nn::StateDict& sd) { sd["other.x"] = ones({1}); }),
                       doctest::Contains("\"other.x\" is neither model.* nor optim.*"), Error);
}

TEST_CASE("writes are atomic: a failed save leaves the previous file intact") {
  testing::TempDir tmp("checkpoint");
  const std::string path = tmp.file("model.safetensors");
  const nn::StateDict v1{{"w", randn64({3}, 1, false)}};
  nn::save_safetensors(path, v1);
  const std::string before = read_bytes(path);

  // Failing before the write: an undefined tensor.
  CHECK_THROWS_WITH_AS(nn::save_safetensors(path, {{"w", ones({2})}, {"x", Tensor()}}),
                       doctest::Contains("tensor \"x\" is undefined"), Error);
  CHECK(read_bytes(path) == before);
  // No directory to write the temp file into.
  CHECK_THROWS_WITH_AS(nn::save_safetensors(tmp.file("no/such/dir.safetensors"), v1),
                       doctest::Contains("[save_safetensors] cannot create a temp file"), Error);
  // Failing at the rename (the target is a non-empty directory): the temp file is removed.
  const std::string blocked = tmp.file("blocked.safetensors");
  fs::create_directories(fs::path(blocked) / "inside");
  CHECK_THROWS_WITH_AS(nn::save_safetensors(blocked, v1), doctest::Contains("renaming"), Error);
  // A temp file left behind by a crashed save does not affect the real file or the next save.
  write_bytes(path + ".tmp.crashd", "half a checkpoint");
  check_same(nn::load_safetensors(path).tensors, v1);
  const nn::StateDict v2{{"w", randn64({5}, 2, false)}};
  nn::save_safetensors(path, v2);
  check_same(nn::load_safetensors(path).tensors, v2);
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(tmp.dir))
    leftovers += e.path().filename().string().find(".tmp.") != std::string::npos;
  CHECK(leftovers == 1);  // only the crashed one we planted
  // An unwritable directory (root may write anywhere, so only checked for other users).
  if (::geteuid() != 0) {
    const fs::path ro = tmp.dir / "ro";
    fs::create_directories(ro);
    nn::save_safetensors((ro / "m.safetensors").string(), v1);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_AS(nn::save_safetensors((ro / "m.safetensors").string(), v2), Error);
    check_same(nn::load_safetensors((ro / "m.safetensors").string()).tensors, v1);
    fs::permissions(ro, fs::perms::owner_all);
  }
}

TEST_CASE("write_file_atomically: a failure says whether a previous file survived; stale temps are removed") {
  testing::TempDir tmp("checkpoint");
  const std::string path = tmp.file("run.txt");
  // No file before: the error must not claim one is untouched.
  CHECK_THROWS_WITH_AS(write_file_atomically(tmp.file("no/dir/run.txt"), {"x"}, "writer"),
                       doctest::Contains("[writer] cannot create a temp file"), Error);
  CHECK_THROWS_WITH_AS(write_file_atomically(tmp.file("no/dir/run.txt"), {"x"}, "writer"),
                       doctest::Contains("was not created"), Error);
  write_file_atomically(path, {"one ", "two\n"}, "writer");
  CHECK(read_bytes(path) == "one two\n");
  // A rename that fails (the target turned into a non-empty directory) leaves nothing behind.
  const std::string blocked = tmp.file("blocked");
  fs::create_directories(fs::path(blocked) / "inside");
  CHECK_THROWS_WITH_AS(write_file_atomically(blocked, {"x"}, "writer"), doctest::Contains("renaming"), Error);

  // Temp files named by a pid: a dead one's are stale, a live one's (ours) are not; other names stay.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(dead > 0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = fmt::format("{}.tmp.{}.AbCdEf", path, dead);
  const std::string live = fmt::format("{}.tmp.{}.GhIjKl", path, ::getpid());
  for (const std::string& f : {stale, live, path + ".tmp.crashd", tmp.file("notes.tmp.12.txt")}) write_bytes(f, "half");
  CHECK(remove_stale_temp_files(tmp.dir.string()) == 1);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(path + ".tmp.crashd"));
  CHECK(fs::exists(tmp.file("notes.tmp.12.txt")));
  CHECK(read_bytes(path) == "one two\n");
  CHECK(remove_stale_temp_files(tmp.file("no/such/dir")) == 0);
}

TEST_CASE("truncated, corrupted and hostile files give a linea::Error naming the file") {
  testing::TempDir tmp("checkpoint");
  const std::string good_path = tmp.file("good.safetensors"), path = tmp.file("bad.safetensors");
  nn::save_safetensors(good_path, {{"a", randn64({2, 3}, 1, false)}, {"b", arange(4)}}, {{"k", "v"}});
  const std::string good = read_bytes(good_path);
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);

  // Truncated at every interesting point.
  for (size_t cut : {size_t(0), size_t(3), size_t(7), size_t(8), size_t(8 + n / 2), size_t(8 + n - 1),
                     size_t(8 + n), good.size() - 1}) {
    CAPTURE(cut);
    write_bytes(path, good.substr(0, cut));
    CHECK_THROWS_WITH_AS(nn::load_safetensors(path), doctest::Contains(path.c_str()), Error);
  }
  // Absurd header lengths.
  for (uint64_t len : {std::numeric_limits<uint64_t>::max(), uint64_t(1) << 62, uint64_t(good.size())}) {
    std::string bad = good;
    std::memcpy(bad.data(), &len, 8);
    write_bytes(path, bad);
    CHECK_THROWS_WITH_AS(nn::load_safetensors(path), doctest::Contains("header length"), Error);
  }
  // Every header byte replaced by JSON-significant characters: an Error or a valid load, never a
  // crash (run under ASan/valgrind to see out-of-bounds reads).
  int errors = 0, loads = 0;
  for (size_t i = 8; i < 8 + n; ++i)
    for (char c : {'{', '}', '[', ']', '"', ':', ',', '0', '9', '-', '\\', '\0', '\xff', ' '}) {
      std::string bad = good;
      bad[i] = c;
      write_bytes(path, bad);
      try {
        nn::load_safetensors(path);
        ++loads;
      } catch (const Error&) {
        ++errors;
      }
    }
  CHECK(errors > 0);
  MESSAGE("header byte flips: " << errors << " errors, " << loads << " valid loads");
  // Random bytes anywhere in the file.
  Generator g(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[g.next_u64() % bad.size()] = static_cast<char>(g.next_u64());
    write_bytes(path, bad);
    try {
      nn::load_safetensors(path);
    } catch (const Error&) {
    }
  }
  CHECK_THROWS_WITH_AS(nn::load_safetensors(tmp.file("missing.safetensors")), doctest::Contains("cannot open"), Error);
}

TEST_CASE("a shape whose size overflows int64 is refused, also beside a 0 dim") {
  testing::TempDir tmp("checkpoint");
  const std::string path = tmp.file("huge.safetensors");
  for (const char* shape : {"[0,4611686018427387904,4]", "[4294967295,4294967295,4294967295,0]"}) {
    CAPTURE(shape);
    write_bytes(path, raw_file(fmt::format(R"({{"t":{{"dtype":"F32","shape":{},"data_offsets":[0,0]}}}})", shape)));
    CHECK_THROWS_WITH_AS(nn::load_safetensors(path), doctest::Contains("impossibly large"), Error);
  }
  write_bytes(path, raw_file(R"({"t":{"dtype":"F32","shape":[0,1099511627776],"data_offsets":[0,0]}})"));
  CHECK(nn::load_safetensors(path).tensors.at("t").shape() == Shape{0, int64_t{1} << 40});
}

TEST_CASE("malformed headers: each problem is named") {
  testing::TempDir tmp("checkpoint");
  const std::string path = tmp.file("h.safetensors");
  auto check = [&](const std::string& header, size_t data, const std::string& what) {
    CAPTURE(header);
    write_bytes(path, raw_file(header, data));
    CHECK_THROWS_WITH_AS(nn::load_safetensors(path), doctest::Contains(what.c_str()), Error);
  };
  const std::string f32 = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  write_bytes(path, raw_file(f32, 24));
  CHECK(nn::load_safetensors(path).tensors.at("a").shape() == Shape{2, 3});  // the baseline is valid

  check("not json", 0, "malformed JSON header at byte 0");
  check("[]", 0, "the header is not a JSON object");
  check("{", 0, "malformed JSON header at byte 1: unexpected end of the text");
  check(R"({"a":})", 0, "unexpected character");
  check(R"({"a":)" + std::string(100000, '[') + std::string(100000, ']') + "}", 0, "nesting deeper than 8 levels");
  check(f32 + "x", 24, "after the top-level value");
  check(R"({"a":1,"a":2})", 0, "duplicate key \"a\"");
  check(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4, "has dtype \"F16\"");
  check(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 20, "out of range");
  check(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 24, "out of range");
  check(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 24, "out of range");
  check(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24,
        "hold 20 bytes, but shape (2, 3) F32 needs 24");
  check(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
        R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 24, "overlap");
  check(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", 0,
        "impossibly large");
  check(R"({"a":{"dtype":"I64","shape":[1152921504606846976],"data_offsets":[0,0]}})", 0, "impossibly large");
  check(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0, "non-negative integers");
  check(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,0]}})", 0, "int64 range");
  check(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})", 0, "expected an integer");
  check(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8, "data_offsets must be [begin, end]");
  check(R"({"a":{"dtype":"F32","shape":[1]}})", 4, "needs dtype, shape and data_offsets");
  check(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4, "unknown field \"x\"");
  check(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", 4, "dtype is not a string");
  check(R"({"a":[1]})", 0, "tensor \"a\" is not an object");
  check(R"({"__metadata__":{"k":1}})", 0, "__metadata__ value of \"k\" is not a string");
  check(R"({"__metadata__":[]})", 0, "__metadata__ is not an object");
  check(R"({"\ud800":1})", 0, "surrogate");
  check(R"({"\u12":1})", 0, "bad hex digit");
  check("{\"a\nb\":1}", 0, "control character");
  check(R"({"a":tru})", 0, "unexpected character");

  // Escapes decode to UTF-8, surrogate pairs included.
  write_bytes(path, raw_file(R"({"\u00e9\ud83d\ude00\n":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})", 1));
  CHECK(nn::load_safetensors(path).tensors.count("\xc3\xa9\xf0\x9f\x98\x80\n"));
}

TEST_CASE("python safetensors reads linea's files and linea reads theirs") {
  if (std::system("python3 -c 'import safetensors, numpy' > /dev/null 2>&1") != 0) {
    MESSAGE("skipped: python3 with numpy and safetensors is not available (pip install numpy safetensors)");
    return;
  }
  testing::TempDir tmp("checkpoint");
  const std::string script = (fs::path(__FILE__).parent_path() / "safetensors_check.py").string();
  REQUIRE(fs::exists(script));

  // linea -> python: every dtype, compared bitwise against the same tensors saved as .npy.
  const nn::StateDict ours = every_dtype();
  nn::save_safetensors(tmp.file("linea.safetensors"), ours, {{"who", "linea"}});
  fs::create_directories(tmp.dir / "npy_linea");
  for (const auto& [name, t] : ours) save_npy(tmp.file("npy_linea/" + name + ".npy"), t);
  const std::string read_cmd = fmt::format("python3 '{}' read '{}' '{}' who=linea", script,
                                           tmp.file("linea.safetensors"), tmp.file("npy_linea"));
  CHECK(std::system(read_cmd.c_str()) == 0);

  // python -> linea.
  const std::string write_cmd = fmt::format("python3 '{}' write '{}' '{}'", script, tmp.file("py.safetensors"),
                                            tmp.file("npy_py"));
  REQUIRE(std::system(write_cmd.c_str()) == 0);
  nn::Safetensors theirs = nn::load_safetensors(tmp.file("py.safetensors"));
  CHECK(theirs.metadata == nn::Metadata{{"who", "python"}});
  nn::StateDict want;
  for (const auto& e : fs::directory_iterator(tmp.dir / "npy_py"))
    want.emplace(e.path().stem().string(), load_npy(e.path().string()));
  CHECK(want.size() == 8);
  check_same(theirs.tensors, want);
}
