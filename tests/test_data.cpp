// The examples' data pipeline (examples/data): IDX files and Fashion-MNIST, image helpers, the
// character corpus and its vocabulary, the MQAR generator, the DataLoader, progress output.
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "data/dataloader.h"
#include "data/idx.h"
#include "data/mqar.h"
#include "data/progress.h"
#include "data/run_files.h"
#include "data/sampling.h"
#include "data/text.h"
#include "helpers.h"

using namespace linea;
using namespace linea::data;
using linea::testing::read_bytes;
using linea::testing::write_bytes;
namespace fs = std::filesystem;

namespace {

const testing::TempDir& tmp() {
  static testing::TempDir d("data");
  return d;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

// An unsigned-byte IDX file: magic 00 00 08 ndim, big-endian dims, then the data.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((d >> shift) & 0xff);
  return s + data;
}

// Pixels 0, 1, 2, ... (mod 256) for n images of h x w.
std::string ramp(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i % 256);
  return s;
}

// A fake Fashion-MNIST split in dir: n images of 28 x 28 and labels i % 10.
void write_fake_split(const fs::path& dir, const std::string& prefix, uint32_t n, bool gzip) {
  fs::create_directories(dir);
  std::string labels(n, '\0');
  for (uint32_t i = 0; i < n; ++i) labels[i] = static_cast<char>(i % 10);
  const std::string images = idx_bytes({n, 28, 28}, ramp(n * 784u));
  const std::string lab = idx_bytes({n}, labels);
  if (gzip) {
    write_gzip((dir / (prefix + "-images-idx3-ubyte.gz")).string(), images);
    write_gzip((dir / (prefix + "-labels-idx1-ubyte.gz")).string(), lab);
  } else {
    write_bytes((dir / (prefix + "-images-idx3-ubyte")).string(), images);
    write_bytes((dir / (prefix + "-labels-idx1-ubyte")).string(), lab);
  }
}

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector_as<int64_t>(); }

}  // namespace

// ---------------------------------------------------------------- IDX and Fashion-MNIST

TEST_CASE("read_idx: raw and gzip files give the same uint8 tensor") {
  const std::string bytes = idx_bytes({2, 3, 4}, ramp(24));
  write_bytes(tmp().file("a.idx"), bytes);
  write_gzip(tmp().file("a.idx.gz"), bytes);
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    Tensor t = read_idx(tmp().file(name));
    CHECK(t.dtype() == DType::UInt8);
    CHECK(t.shape() == Shape{2, 3, 4});
    CHECK(t.at({1, 2, 3}) == 23);
    CHECK(t.at({0, 1, 0}) == 4);
  }
  // A gzip file is really compressed (the test would pass vacuously if gzwrite stored it raw).
  CHECK(read_bytes(tmp().file("a.idx.gz")).substr(0, 2) == "\x1f\x8b");
}

TEST_CASE("read_idx: bad magic, unsupported type, truncated header and data, extra bytes, broken gzip") {
  auto check_error = [](const std::string& name, const std::string& bytes, const std::string& what) {
    write_bytes(tmp().file(name), bytes);
    CHECK_THROWS_WITH_AS(read_idx(tmp().file(name)), doctest::Contains(what.c_str()), linea::Error);
    CHECK_THROWS_WITH_AS(read_idx(tmp().file(name)), doctest::Contains(tmp().file(name).c_str()), linea::Error);
  };
  check_error("magic.idx", "\x01\x02\x08\x01" + std::string(8, '\0'), "bad magic");
  check_error("short.idx", "\x00", "bad magic");
  check_error("type.idx", std::string("\0\0\x0d\x01\0\0\0\x01", 8) + "abcd", "element type 0x0d");
  check_error("header.idx", std::string("\0\0\x08\x03\0\0\0\x02", 8), "truncated header");
  check_error("data.idx", idx_bytes({10, 28, 28}, ramp(7839)), "(truncated)");
  check_error("extra.idx", idx_bytes({2, 2}, ramp(5)), "more data than the 4 bytes its dims (2, 2) declare");
  check_error("zero.idx", std::string("\0\0\x08\0", 4), "0 dims");
  // A gzip stream cut in half.
  const std::string gz_path = tmp().file("cut.idx.gz");
  write_gzip(gz_path, idx_bytes({100, 100}, ramp(10000)));
  const std::string gz = read_bytes(gz_path);
  write_bytes(gz_path, gz.substr(0, gz.size() / 2));
  CHECK_THROWS_WITH_AS(read_idx(gz_path), doctest::Contains("broken gzip data"), linea::Error);
  CHECK_THROWS_WITH_AS(read_idx(tmp().file("nope.idx")), doctest::Contains("no such file"), linea::Error);
}

TEST_CASE("read_idx: empty data, and dims whose size overflows int64 beside a 0 dim") {
  for (const std::vector<uint32_t>& dims : {std::vector<uint32_t>{0}, std::vector<uint32_t>{5, 0, 28}}) {
    write_bytes(tmp().file("empty.idx"), idx_bytes(dims, ""));
    Tensor t = read_idx(tmp().file("empty.idx"));
    CHECK(t.numel() == 0);
    CHECK(t.dim() == static_cast<int64_t>(dims.size()));
  }
  write_bytes(tmp().file("huge.idx"), idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu, 0}, ""));
  CHECK_THROWS_WITH_AS(read_idx(tmp().file("huge.idx")), doctest::Contains("impossibly large"), linea::Error);
}

// The memory-bound part cannot run under AddressSanitizer, which reserves terabytes of address space.
#if defined(__SANITIZE_ADDRESS__)
#define LINEA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LINEA_TEST_ASAN 1
#endif
#endif

TEST_CASE("read_idx: a gzip bomb is refused after the bytes its header declares, in bounded memory") {
  // A 4-byte IDX header and 4 data bytes, followed by 256 MB of zeros: about 250 KB gzipped.
  const std::string path = tmp().file("bomb.idx.gz");
  gzFile f = gzopen(path.c_str(), "wb9");
  REQUIRE(f != nullptr);
  const std::string head = idx_bytes({4}, "abcd");
  REQUIRE(gzwrite(f, head.data(), static_cast<unsigned>(head.size())) == static_cast<int>(head.size()));
  const std::string zeros_mb(1 << 20, '\0');
  for (int i = 0; i < 256; ++i) REQUIRE(gzwrite(f, zeros_mb.data(), 1 << 20) == 1 << 20);
  gzclose(f);
  REQUIRE(fs::file_size(path) < (1 << 20));

#ifdef LINEA_TEST_ASAN
  MESSAGE("AddressSanitizer build: the error is checked, the memory bound is not");
  CHECK_THROWS_WITH_AS(read_idx(path), doctest::Contains("more data than the 4 bytes"), linea::Error);
#else
  // With the address space capped at 64 MB above what the process uses now, inflating the whole
  // stream would fail with std::bad_alloc instead of the clear error.
  std::ifstream status("/proc/self/status");
  std::string line;
  size_t vm_kb = 0;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoul(line.substr(7));
  REQUIRE(vm_kb > 0);
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_AS, &saved) == 0);
  rlimit capped = saved;
  capped.rlim_cur = (vm_kb << 10) + (64u << 20);
  REQUIRE(setrlimit(RLIMIT_AS, &capped) == 0);
  bool clear_error = false;
  try {
    read_idx(path);
  } catch (const linea::Error& e) {
    clear_error = std::string(e.what()).find("more data than the 4 bytes its dims (4,) declare") != std::string::npos;
  } catch (const std::bad_alloc&) {
  }
  REQUIRE(setrlimit(RLIMIT_AS, &saved) == 0);
  CHECK(clear_error);
#endif
}

TEST_CASE("load_fashion_mnist: a data dir with gzip or raw files; shape and label checks") {
  for (bool gzip : {true, false}) {
    const fs::path dir = tmp().dir / (gzip ? "fm_gz" : "fm_raw");
    write_fake_split(dir, "t10k", 12, gzip);
    ImageDataset d = load_fashion_mnist("test", dir.string());
    CHECK(d.images.shape() == Shape{12, 28, 28});
    CHECK(d.images.dtype() == DType::UInt8);
    CHECK(d.labels.dtype() == DType::Int64);
    CHECK(ints(d.labels) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1});
    CHECK(d.images.at({1, 0, 0}) == 784 % 256);
  }
  const fs::path bad = tmp().dir / "fm_bad";
  fs::create_directories(bad);
  // Wrong image dims.
  write_bytes((bad / "train-images-idx3-ubyte").string(), idx_bytes({2, 27, 28}, ramp(2 * 27 * 28)));
  write_bytes((bad / "train-labels-idx1-ubyte").string(), idx_bytes({2}, std::string(2, '\0')));
  CHECK_THROWS_WITH_AS(load_fashion_mnist("train", bad.string()), doctest::Contains("(N, 28, 28)"), linea::Error);
  // Label count differs from the image count.
  write_bytes((bad / "train-images-idx3-ubyte").string(), idx_bytes({2, 28, 28}, ramp(2 * 784)));
  write_bytes((bad / "train-labels-idx1-ubyte").string(), idx_bytes({3}, std::string(3, '\0')));
  CHECK_THROWS_WITH_AS(load_fashion_mnist("train", bad.string()), doctest::Contains("expected 2 labels"),
                       linea::Error);
  // A label outside 0..9.
  write_bytes((bad / "train-labels-idx1-ubyte").string(), idx_bytes({2}, std::string("\x01\x0a", 2)));
  CHECK_THROWS_WITH_AS(load_fashion_mnist("train", bad.string()), doctest::Contains("label 10 at index 1"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(load_fashion_mnist("valid", bad.string()), doctest::Contains("[fashion_mnist] split"),
                       linea::Error);
}

TEST_CASE("load_fashion_mnist: missing files name the file and the Debian package") {
  const fs::path empty_dir = tmp().dir / "fm_empty";
  fs::create_directories(empty_dir);
  CHECK_THROWS_WITH_AS(load_fashion_mnist("train", empty_dir.string()),
                       doctest::Contains("sudo apt-get install dataset-fashion-mnist"), linea::Error);
  CHECK_THROWS_WITH_AS(load_fashion_mnist("test", empty_dir.string()),
                       doctest::Contains((empty_dir / "t10k-images-idx3-ubyte.gz").string().c_str()), linea::Error);
}

TEST_CASE("load_fashion_mnist: the real dataset from dataset-fashion-mnist, when installed") {
  if (!fs::exists(fs::path(kFashionMnistDir) / "train-images-idx3-ubyte.gz")) {
    MESSAGE("skipped: dataset-fashion-mnist is not installed (sudo apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  ImageDataset train = load_fashion_mnist("train");
  ImageDataset test = load_fashion_mnist("test");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("Fashion-MNIST train + test loaded in " << secs << " s");
  CHECK(train.images.shape() == Shape{60000, 28, 28});
  CHECK(test.images.shape() == Shape{10000, 28, 28});
  // Both splits are balanced: 6000 and 1000 images of each class.
  for (const auto& [d, per_class] : {std::pair{&train, 6000}, std::pair{&test, 1000}}) {
    std::vector<int64_t> count(10, 0);
    for (int64_t l : ints(d->labels)) {
      REQUIRE((l >= 0 && l < 10));
      ++count[l];
    }
    CHECK(count == std::vector<int64_t>(10, per_class));
  }
  // The train-set pixel statistics everyone normalises with.
  PixelStats s = pixel_stats(train.images);
  CHECK(s.mean == doctest::Approx(0.2860).epsilon(1e-3));
  CHECK(s.std == doctest::Approx(0.3530).epsilon(1e-3));
}

// ---------------------------------------------------------------- image helpers

TEST_CASE("pixel_stats and normalize_images match a direct computation") {
  Tensor img = from_vector<uint8_t>({0, 255, 51, 102, 0, 0, 255, 255}, {2, 2, 2});
  PixelStats s = pixel_stats(img);
  const std::vector<double> v = {0, 1, 0.2, 0.4, 0, 0, 1, 1};
  double mean = 0, var = 0;
  for (double x : v) mean += x / 8;
  for (double x : v) var += (x - mean) * (x - mean) / 8;
  CHECK(s.mean == doctest::Approx(mean));
  CHECK(s.std == doctest::Approx(std::sqrt(var)));
  Tensor n = normalize_images(img, s);
  CHECK(n.shape() == Shape{2, 1, 2, 2});
  CHECK(n.dtype() == DType::Float32);
  std::vector<double> want;
  for (double x : v) want.push_back((x - mean) / std::sqrt(var));
  CHECK(testing::allclose(n, from_vector(want, {2, 1, 2, 2}).to(DType::Float32), 1e-6));
  CHECK_THROWS_WITH_AS(normalize_images(n, s), doctest::Contains("[normalize_images]"), linea::Error);
  CHECK_THROWS_WITH_AS(pixel_stats(n), doctest::Contains("[pixel_stats]"), linea::Error);
}

TEST_CASE("pad_images: 28x28 -> 32x32 keeps the image in the middle and fills the border") {
  Tensor img = from_vector<uint8_t>(std::vector<uint8_t>(2 * 28 * 28, 7), {2, 28, 28});
  Tensor p = pad_images(img, 2);
  CHECK(p.shape() == Shape{2, 32, 32});
  CHECK(p.at({1, 0, 0}) == 0);
  CHECK(p.at({1, 1, 31}) == 0);
  CHECK(p.at({1, 2, 2}) == 7);
  CHECK(p.at({0, 29, 29}) == 7);
  CHECK(p.at({0, 30, 29}) == 0);
  Tensor f = pad_images(from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2}), 1, -0.5);
  CHECK(f.to_vector() == std::vector<double>{-.5, -.5, -.5, -.5, -.5, 1, 2, -.5, -.5, 3, 4, -.5, -.5, -.5, -.5, -.5});
  CHECK_THROWS_WITH_AS(pad_images(img, -1), doctest::Contains("[pad_images]"), linea::Error);
}

TEST_CASE("random_crop_flip: every image is a shift by at most pad, maybe mirrored; seeded") {
  const int64_t n = 64, c = 2, h = 5, w = 6, pad = 2;
  Generator g0(3);
  Tensor batch = randn({n, c, h, w}, g0);
  AugmentOptions opts{.pad = pad, .flip = true, .fill = -9};
  Generator g1(11), g2(11);
  Tensor out = random_crop_flip(batch, opts, g1);
  CHECK(out.to_vector() == random_crop_flip(batch, opts, g2).to_vector());
  // Find, for each image, the (dy, dx, flip) that explains it.
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  for (int64_t i = 0; i < n; ++i) {
    bool found = false;
    for (int64_t dy = -pad; dy <= pad && !found; ++dy)
      for (int64_t dx = -pad; dx <= pad && !found; ++dx)
        for (bool flip : {false, true}) {
          bool ok = true;
          for (int64_t ch = 0; ch < c && ok; ++ch)
            for (int64_t y = 0; y < h && ok; ++y)
              for (int64_t x = 0; x < w && ok; ++x) {
                const int64_t sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
                const double want = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? batch.at({i, ch, sy, sx}) : -9;
                ok = out.at({i, ch, y, x}) == want;
              }
          if (ok) {
            found = true;
            seen.insert({dy, dx, flip});
            break;
          }
        }
    CHECK(found);
  }
  CHECK(seen.size() > 20);  // 64 draws from 50 choices cover many of them
  // pad 0 and no flip: the identity.
  Generator g3(1);
  CHECK(random_crop_flip(batch, {.pad = 0, .flip = false}, g3).to_vector() == batch.to_vector());
  CHECK_THROWS_WITH_AS(random_crop_flip(zeros({4, 4}), opts, g3), doctest::Contains("[random_crop_flip]"),
                       linea::Error);
}

// ---------------------------------------------------------------- text

TEST_CASE("Vocab: sorted distinct bytes, encode/decode round trip, save/load") {
  const std::string text = "hello, world\nzebra \xc3\xa9t\xc3\xa9";  // UTF-8 bytes are tokens too
  Vocab v = Vocab::from_text(text);
  std::set<uint8_t> distinct(text.begin(), text.end());
  CHECK(v.bytes() == std::vector<uint8_t>(distinct.begin(), distinct.end()));
  Tensor ids = v.encode(text);
  CHECK(ids.dtype() == DType::Int64);
  CHECK(ids.numel() == static_cast<int64_t>(text.size()));
  CHECK(ids.at({0}) == std::distance(distinct.begin(), distinct.find('h')));
  CHECK(v.decode(ids) == text);
  CHECK(v.decode(ids.view({1, -1})) == text);
  CHECK_THROWS_WITH_AS(v.encode("hello!"), doctest::Contains("byte 33 at offset 5"), linea::Error);
  CHECK_THROWS_WITH_AS(v.decode(from_vector<int64_t>({v.size()})), doctest::Contains("out of range"), linea::Error);

  const std::string path = tmp().file("vocab.json");
  v.save(path);
  CHECK(read_bytes(path).find("\"bytes\": [10, 32,") != std::string::npos);
  Vocab w = Vocab::load(path);
  CHECK(w.bytes() == v.bytes());
  CHECK(w.decode(w.encode(text)) == text);

  write_bytes(tmp().file("v1.json"), "{\"format\": \"linea-char-vocab\", \"bytes\": [10, 10]}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v1.json")), doctest::Contains("increasing order"), linea::Error);
  write_bytes(tmp().file("v2.json"), "{\"format\": \"linea-char-vocab\", \"bytes\": [10, 300]}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v2.json")), doctest::Contains("bad entry"), linea::Error);
  write_bytes(tmp().file("v3.json"), "{\"vocab_size\": 65}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v3.json")), doctest::Contains("not a vocabulary file"),
                       linea::Error);
  write_bytes(tmp().file("v4.json"), "{\"format\": \"linea-char-vocab\", \"bytes\": [10, x]}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v4.json")), doctest::Contains("malformed JSON at byte 45: unexpected"),
                       linea::Error);
  write_bytes(tmp().file("v6.json"), "{\"format\": \"linea-char-vocab\", \"bytes\": [10, \"a\"]}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v6.json")), doctest::Contains("bad entry a string at index 1"),
                       linea::Error);
  write_bytes(tmp().file("v7.json"), "{\"format\": \"linea-char-vocab\", \"bytes\": [10, 32], \"bytes\": [7]}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v7.json")), doctest::Contains("duplicate key \"bytes\""), linea::Error);
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("none.json")), doctest::Contains("cannot open"), linea::Error);
  // A directory or a device is no vocabulary (and /dev/zero would never end).
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().dir.string()), doctest::Contains("not a regular file"), linea::Error);
  CHECK_THROWS_WITH_AS(Vocab::load("/dev/zero"), doctest::Contains("not a regular file"), linea::Error);
  write_bytes(tmp().file("v5.json"), "{\"format\": \"linea-char-vocab\", \"bytes\": [10" + std::string(2 << 20, ' ') + "]}");
  CHECK_THROWS_WITH_AS(Vocab::load(tmp().file("v5.json")), doctest::Contains("too large"), linea::Error);
}

TEST_CASE("CharCorpus: 90/10 split, batches are windows of the split shifted by one") {
  // Random letters: every 10-letter window occurs once, so a window tells where it came from.
  std::string text;
  Generator letters(123);
  for (int i = 0; i < 105; ++i) text += static_cast<char>('a' + random_below(letters, 26));
  const std::string path = tmp().file("corpus.txt");
  write_bytes(path, text);
  CharCorpus c = CharCorpus::from_file(path);
  CHECK(c.vocab().bytes() == Vocab::from_text(text).bytes());
  CHECK(c.size("train") == 94);  // floor(0.9 * 105)
  CHECK(c.size("val") == 11);
  Generator gen(5);
  for (const char* split : {"train", "val"}) {
    const std::string part = std::string(split) == "train" ? text.substr(0, 94) : text.substr(94);
    TextBatch b = c.get_batch(split, 16, 10, gen);
    CHECK(b.x.shape() == Shape{16, 10});
    CHECK(b.y.shape() == Shape{16, 10});
    for (int64_t i = 0; i < 16; ++i) {
      const std::string xs = c.vocab().decode(b.x.select(0, i)), ys = c.vocab().decode(b.y.select(0, i));
      CHECK(xs.substr(1) == ys.substr(0, 9));  // y is x shifted by one
      CHECK(part.find(xs + ys.back()) != std::string::npos);  // a window of this split only
    }
  }
  // The same generator state gives the same batch.
  Generator g1(9), g2(9);
  CHECK(ints(c.get_batch("train", 4, 8, g1).x) == ints(c.get_batch("train", 4, 8, g2).x));
  // Every window start of the train split is drawn, the last one (83 = 94 - 10 - 1) included.
  std::set<size_t> starts;
  const TextBatch many = c.get_batch("train", 3000, 10, gen);
  for (int64_t i = 0; i < 3000; ++i) {
    const size_t at = text.find(c.vocab().decode(many.x.select(0, i)));
    REQUIRE(text.find(c.vocab().decode(many.x.select(0, i)), at + 1) == std::string::npos);  // unique window
    starts.insert(at);
  }
  CHECK(starts.size() == 84);
  CHECK(*starts.rbegin() == 83);
  // 11 val tokens and context 10: exactly one window fits; context 11 does not.
  CHECK(c.vocab().decode(c.get_batch("val", 1, 10, gen).x) == text.substr(94, 10));
  CHECK_THROWS_WITH_AS(c.get_batch("val", 1, 11, gen), doctest::Contains("too few for a context of 11"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(c.get_batch("test", 1, 4, gen), doctest::Contains("[CharCorpus] split"), linea::Error);
  // A saved vocabulary is reused: a different file with only known bytes keeps the ids.
  write_bytes(tmp().file("small.txt"), "zz");
  CharCorpus d = CharCorpus::from_file(tmp().file("small.txt"), c.vocab());
  CHECK(d.vocab().bytes() == c.vocab().bytes());
  write_bytes(tmp().file("other.txt"), "ABC");
  CHECK_THROWS_WITH_AS(CharCorpus::from_file(tmp().file("other.txt"), c.vocab()),
                       doctest::Contains("not in the vocabulary"), linea::Error);
  CHECK_THROWS_WITH_AS(CharCorpus::from_file(tmp().file("missing.txt")), doctest::Contains("cannot open"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(CharCorpus::from_file(default_corpus_path() + ".absent"), doctest::Contains("cannot open"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(CharCorpus::from_file(tmp().dir.string()), doctest::Contains("not a regular file"),
                       linea::Error);
}

// ---------------------------------------------------------------- MQAR

namespace {
std::vector<int64_t> ids_upto(int64_t n, int64_t first = 0) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}
}  // namespace

TEST_CASE("make_mqar: Zoology's layout: disjoint key and value ranges, every key queried once, only queries scored") {
  for (const bool random_fill : {false, true}) {
    CAPTURE(random_fill);
    const MqarConfig cfg{.vocab = 128, .seq_len = 40, .num_kv = 6, .random_non_queries = random_fill};
    const int64_t T = 40, C = 12;  // C: the pairs' tokens
    const MqarBatch b = make_mqar(cfg, 5, ids_upto(64));
    REQUIRE(b.inputs.shape() == Shape{64, T});
    REQUIRE(b.targets.shape() == Shape{64, T});
    const auto in = ints(b.inputs), tg = ints(b.targets);
    int64_t fillers = 0;
    for (int64_t s = 0; s < 64; ++s) {
      const int64_t* x = in.data() + s * T;
      const int64_t* y = tg.data() + s * T;
      std::map<int64_t, int64_t> kv;
      std::set<int64_t> values;
      for (int64_t i = 0; i < 6; ++i) {
        CHECK((x[2 * i] >= 1 && x[2 * i] < 64));         // keys in [1, vocab/2)
        CHECK((x[2 * i + 1] >= 64 && x[2 * i + 1] < 128));  // values in [vocab/2, vocab)
        CHECK(kv.count(x[2 * i]) == 0);                     // unique keys
        CHECK(values.insert(x[2 * i + 1]).second);          // unique values
        kv[x[2 * i]] = x[2 * i + 1];
      }
      for (int64_t t = 0; t < C; ++t) CHECK(y[t] == kIgnoreIndex);
      std::map<int64_t, int64_t> asked;  // key -> times queried
      for (int64_t t = C; t < T; ++t) {
        if (y[t] == kIgnoreIndex) {
          // Not a query: token 0, or with random_non_queries a random token.
          if (!random_fill) CHECK(x[t] == 0);
          fillers += 1;
          continue;
        }
        CHECK((t - C) % 2 == 0);  // queries sit at even offsets after the pairs
        REQUIRE(kv.count(x[t]) == 1);
        CHECK(y[t] == kv[x[t]]);  // the label is the value paired with the queried key
        ++asked[x[t]];
      }
      CHECK(asked.size() == 6);  // every key ...
      for (auto [key, n] : asked) CHECK(n == 1);  // ... exactly once
    }
    CHECK(fillers == 64 * (T - C - 6));
    if (random_fill) {  // the fillers are random tokens of the whole vocabulary, not all 0
      int64_t zeros = 0;
      for (int64_t t : in) zeros += t == 0;
      CHECK(zeros < fillers / 20);
    }
    const Accuracy all = masked_accuracy(b.targets, b.targets);
    CHECK(all.total == 64 * 6);
    CHECK(all.value() == 1.0);
    CHECK(masked_accuracy(zeros_like(b.targets), b.targets).value() == 0.0);
  }
}

TEST_CASE("make_mqar: query gaps follow the power law (g+1)^(a-1)") {
  // One pair, so each example draws one gap g from [0, space): P(g) = (g+1)^(a-1) / sum.
  const int64_t T = 34, space = 16, n = 20000;
  for (const double a : {0.01, 1.0}) {
    CAPTURE(a);
    const MqarConfig cfg{.vocab = 64, .seq_len = T, .num_kv = 1, .power_a = a};
    const MqarBatch b = make_mqar(cfg, 3, ids_upto(n));
    const auto tg = ints(b.targets);
    std::vector<int64_t> count(space, 0);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t t = 2; t < T; ++t)
        if (tg[s * T + t] != kIgnoreIndex) ++count[(t - 2) / 2];
    double z = 0;
    for (int64_t g = 0; g < space; ++g) z += std::pow(g + 1.0, a - 1);
    for (int64_t g : {0, 1, 7, 15}) {
      const double p = std::pow(g + 1.0, a - 1) / z, sd = std::sqrt(p * (1 - p) / n);
      CAPTURE(g);
      CHECK(std::abs(static_cast<double>(count[g]) / n - p) < 5 * sd);
    }
  }
}

TEST_CASE("make_mqar: a fixed split: example i is the same sequence in any batch; splits differ; errors") {
  const MqarConfig cfg{.vocab = 8192, .seq_len = 64, .num_kv = 8};
  const MqarBatch all = make_mqar(cfg, 11, ids_upto(40));
  const MqarBatch some = make_mqar(cfg, 11, {31, 2, 31});  // any order, repeats allowed
  const auto a = ints(all.inputs), s = ints(some.inputs), at = ints(all.targets), st = ints(some.targets);
  auto row = [](const std::vector<int64_t>& v, int64_t r) { return std::vector<int64_t>(v.begin() + r * 64, v.begin() + (r + 1) * 64); };
  CHECK(row(s, 0) == row(a, 31));
  CHECK(row(s, 1) == row(a, 2));
  CHECK(row(s, 2) == row(a, 31));
  CHECK(row(st, 1) == row(at, 2));
  CHECK(row(a, 0) != row(a, 1));

  // Train and test splits (two seeds) share no example.
  const auto train = ints(make_mqar(cfg, 11, ids_upto(2000)).inputs);
  const auto test = ints(make_mqar(cfg, 12, ids_upto(300)).inputs);
  std::set<std::vector<int64_t>> seen;
  for (int64_t r = 0; r < 2000; ++r) seen.insert(row(train, r));
  CHECK(seen.size() == 2000);
  for (int64_t r = 0; r < 300; ++r) CHECK(seen.count(row(test, r)) == 0);

  auto err = [](MqarConfig c) { return make_mqar(c, 1, {0}); };
  CHECK_THROWS_WITH_AS(err({.vocab = 64, .seq_len = 64, .num_kv = 4}), doctest::Contains("vocab 64 must exceed seq_len 64"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(err({.vocab = 128, .seq_len = 33, .num_kv = 4}), doctest::Contains("even seq_len"), linea::Error);
  CHECK_THROWS_WITH_AS(err({.vocab = 128, .seq_len = 30, .num_kv = 8}),
                       doctest::Contains("cannot hold 8 key-value pairs and their queries (needs 32)"), linea::Error);
  CHECK_THROWS_WITH_AS(err({.vocab = 128, .seq_len = 32, .num_kv = 4, .power_a = 0}), doctest::Contains("power_a"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(make_mqar(cfg, 1, {}), doctest::Contains("at least one example"), linea::Error);
  CHECK_THROWS_WITH_AS(make_mqar(cfg, 1, {-1}), doctest::Contains("ids are >= 0"), linea::Error);
  CHECK_THROWS_WITH_AS(masked_accuracy(all.inputs, all.targets.view({-1})), doctest::Contains("[masked_accuracy]"),
                       linea::Error);
}

// ---------------------------------------------------------------- DataLoader

namespace {
// All batches of one epoch, as the list of sample ids (y holds each sample's id).
std::vector<std::vector<int64_t>> epoch_ids(DataLoader& loader, int64_t epoch, int64_t first = 0) {
  loader.start_epoch(epoch, first);
  std::vector<std::vector<int64_t>> out;
  while (auto b = loader.next()) {
    CHECK(b->x.size(0) == b->y.size(0));
    out.push_back(ints(b->y));
  }
  return out;
}
std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& v) {
  std::vector<int64_t> f;
  for (const auto& b : v) f.insert(f.end(), b.begin(), b.end());
  return f;
}
}  // namespace

TEST_CASE("DataLoader: each sample once per epoch, a new order each epoch, the same for the same seed") {
  const int64_t n = 103;
  Tensor x = arange(0, n, 1, DType::Float32).view({n, 1}).expand({n, 3}).contiguous();
  Tensor y = arange(n);
  DataLoader a(x, y, {.batch_size = 10, .seed = 42}), b(x, y, {.batch_size = 10, .seed = 42});
  CHECK(a.batches_per_epoch() == 11);
  auto e0 = epoch_ids(a, 0), e1 = epoch_ids(a, 1);
  CHECK(e0.size() == 11);
  CHECK(e0.back().size() == 3);  // the partial batch is kept
  for (const auto& e : {e0, e1}) {
    std::vector<int64_t> ids = flat(e);
    std::sort(ids.begin(), ids.end());
    CHECK(ids == ints(arange(n)));
  }
  CHECK(flat(e0) != flat(e1));
  CHECK(epoch_ids(b, 1) == e1);  // epoch order depends on (seed, epoch), not on history
  CHECK(epoch_ids(b, 0) == e0);
  // x rows travel with their y.
  a.start_epoch(2);
  auto batch = a.next();
  REQUIRE(batch.has_value());
  for (int64_t i = 0; i < batch->x.size(0); ++i) CHECK(batch->x.at({i, 2}) == batch->y.at({i}));

  DataLoader other(x, y, {.batch_size = 10, .seed = 43});
  CHECK(epoch_ids(other, 0) != e0);
  DataLoader ordered(x, y, {.batch_size = 10, .shuffle = false});
  CHECK(flat(epoch_ids(ordered, 5)) == ints(arange(n)));
  DataLoader dropping(x, y, {.batch_size = 10, .drop_last = true, .seed = 42});
  auto d0 = epoch_ids(dropping, 0);
  CHECK(d0.size() == 10);
  CHECK(d0.back().size() == 10);
  CHECK(std::vector(d0.begin(), d0.end()) == std::vector(e0.begin(), e0.end() - 1));
}

TEST_CASE("DataLoader: transform on the worker, seeded per batch; resume mid-epoch sees the same batches") {
  const int64_t n = 50;
  Tensor x = zeros({n, 2});
  Tensor y = arange(n);
  auto transform = [](const Tensor& xb, Generator& gen) { return xb + rand(xb.shape(), gen); };
  DataLoader a(x, y, {.batch_size = 8, .seed = 1, .transform = transform}),
      b(x, y, {.batch_size = 8, .seed = 1, .transform = transform, .prefetch = 1});
  a.start_epoch(3);
  std::vector<std::vector<double>> full;
  while (auto bt = a.next()) full.push_back(bt->x.to_vector());
  CHECK(full.size() == 7);
  CHECK(full[0] != full[1]);
  b.start_epoch(3, 4);  // resume at batch 4
  for (size_t i = 4; i < full.size(); ++i) {
    auto bt = b.next();
    REQUIRE(bt.has_value());
    CHECK(bt->x.to_vector() == full[i]);
  }
  CHECK_FALSE(b.next().has_value());
  CHECK_FALSE(b.next().has_value());  // stays over until the next start_epoch
  // Restarting an epoch half-way through drops what was prepared for the old one.
  a.start_epoch(3);
  a.next();
  a.start_epoch(3);
  CHECK(a.next()->x.to_vector() == full[0]);
}

TEST_CASE("DataLoader: worker exceptions reach next(); bad arguments; destruction mid-epoch") {
  Tensor x = zeros({20, 2});
  Tensor y = arange(20);
  int64_t calls = 0;
  DataLoader loader(x, y, {.batch_size = 5, .shuffle = false, .transform = [&](const Tensor& xb, Generator&) {
                             if (++calls == 2) throw Error("[augment] broken batch");
                             return xb;
                           }, .prefetch = 1});
  loader.start_epoch(0);
  CHECK(loader.next().has_value());
  CHECK_THROWS_WITH_AS(loader.next(), doctest::Contains("[augment] broken batch"), linea::Error);
  CHECK(loader.next().has_value());  // the next batches still come
  CHECK_THROWS_WITH_AS(DataLoader(x, arange(19)), doctest::Contains("same first dim"), linea::Error);
  CHECK_THROWS_WITH_AS(DataLoader(x, y, {.batch_size = 0}), doctest::Contains("batch_size"), linea::Error);
  CHECK_THROWS_WITH_AS(DataLoader(zeros({20, 2}, DType::UInt8), y), doctest::Contains("float32, float64 or int64"),
                       linea::Error);
  DataLoader fresh(x, y);
  CHECK_THROWS_WITH_AS(fresh.next(), doctest::Contains("call start_epoch"), linea::Error);
  CHECK_THROWS_WITH_AS(fresh.start_epoch(0, 2), doctest::Contains("first_batch"), linea::Error);
  {
    DataLoader busy(x, y, {.batch_size = 1});
    busy.start_epoch(0);
    busy.next();
  }  // destroyed with batches still being made: must join, not hang
}

// ---------------------------------------------------------------- progress

TEST_CASE("Progress: plain lines when not a terminal, then a summary") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    Progress p(100, "train", {.items_per_step = 32, .unit = "img", .log_every = 25, .out = f});
    for (int64_t s = 1; s <= 100; ++s) p.update(s, {{"loss", 1.0 / s}, {"acc", 0.5}});
    p.finish("test acc 0.9000");
  }
  std::rewind(f);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  std::fclose(f);
  CHECK(out.find('\r') == std::string::npos);  // no live redraws in a file
  CHECK(out.find("train 25/100 [25%] loss 0.0400 acc 0.5000") != std::string::npos);
  CHECK(out.find("train 100/100 [100%] loss 0.0100") != std::string::npos);
  CHECK(out.find("img/s") != std::string::npos);
  CHECK(out.find("ETA") != std::string::npos);
  CHECK(out.find("train done: 100 steps in") != std::string::npos);
  CHECK(out.find("test acc 0.9000") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 5);  // steps 25, 50, 75, 100 and the summary
}

TEST_CASE("format_duration and the stop flag: SIGINT and SIGTERM") {
  CHECK(format_duration(12.34) == "12.3s");
  CHECK(format_duration(245) == "4m05s");
  CHECK(format_duration(3725) == "1h02m");
  std::atomic<int>& flag = install_stop_signals();
  CHECK(&flag == &install_stop_signals());
  CHECK(flag.load() == 0);
  for (int sig : {SIGINT, SIGTERM}) {
    std::raise(sig);  // the first signal only sets the flag
    CHECK(flag.load() == sig);
    flag = 0;
  }
  CHECK(stop_status(SIGINT) == 130);
  CHECK(stop_status(SIGTERM) == 143);
  CHECK(signal_name(SIGTERM) == "SIGTERM");
}

TEST_CASE("run files: one run per directory (run.lock names the holder's pid); a dead run's lock is taken over") {
  testing::TempDir t("run_lock");
  const std::string dir = t.file("run"), lock_file = t.file("run/run.lock");
  const std::string pid = std::to_string(getpid()) + "\n";
  {
    const RunLock lock = open_run_dir("prog", dir, RunStart::Fresh, {});
    CHECK(read_bytes(lock_file) == pid);
    // flock locks belong to the open file, so a second open in this process is refused as another run's is:
    // by check_run_dir before anything is loaded, and by open_run_dir.
    const std::string refusal = "[other] --out '" + dir + "' is in use by another run (pid " + std::to_string(getpid());
    CHECK_THROWS_WITH_AS(check_run_dir("other", dir, RunStart::Resume), doctest::Contains(refusal.c_str()), Error);
    CHECK_THROWS_WITH_AS((void)open_run_dir("other", dir, RunStart::Resume, {}), doctest::Contains(refusal.c_str()),
                         Error);
    CHECK(read_bytes(lock_file) == pid);  // the refused run wrote nothing
  }
  check_run_dir("prog", dir, RunStart::Fresh);  // a lock file no run holds does not make it a run's
  write_bytes(lock_file, "999999999\n");  // left by a run that died: nobody holds its lock
  {
    const RunLock lock = open_run_dir("prog", dir, RunStart::Resume, {});
    CHECK(read_bytes(lock_file) == pid);  // the live holder's pid, not the dead one's
  }
  // A run that filled the directory after this one's check_run_dir: the Fresh start is refused once locked.
  write_bytes(t.file("run/metrics.csv"), "step\n");
  CHECK_THROWS_WITH_AS((void)open_run_dir("prog", dir, RunStart::Fresh, {}), doctest::Contains("is not empty"), Error);
}

TEST_CASE("run files: Checksum is FNV-1a over the bytes, with their count") {
  testing::TempDir t("checksum");
  write_bytes(t.file("a.txt"), "a");
  CHECK(file_checksum("prog", t.file("a.txt")) == "1 bytes, fnv1a af63dc4c8601ec8c");  // FNV-1a 64 of "a"
  Checksum c;
  c.add("a", 1);
  CHECK(c.str() == "1 bytes, fnv1a af63dc4c8601ec8c");
  CHECK(Checksum().str() == "0 bytes, fnv1a cbf29ce484222325");  // the offset basis
  CHECK_THROWS_WITH_AS(file_checksum("prog", t.file("none.txt")), doctest::Contains("[prog] cannot read"), Error);
}

TEST_CASE("run files: a fresh run refuses a non-empty directory; metrics.csv is truncated to the resumed step") {
  testing::TempDir t("run_files");
  const std::string dir = t.file("run"), csv = t.file("run/metrics.csv");
  check_run_dir("prog", dir, RunStart::Fresh);  // does not exist yet: fine, and nothing is made
  CHECK_FALSE(fs::exists(dir));
  (void)open_run_dir("prog", dir, RunStart::Fresh, {});  // the lock goes at once: check_run_dir refuses a held one
  {
    MetricsCsv m("prog", csv, "epoch,step,loss", false, "step", 0);
    m.append("1,10,0.5");
    m.append("2,20,0.4");
    m.append("3,30,0.3");
  }
  CHECK(read_bytes(csv) == "epoch,step,loss\n1,10,0.5\n2,20,0.4\n3,30,0.3\n");
  const std::string refusal = "[prog] --out '" + dir + "' is not empty (it holds metrics.csv)";
  CHECK_THROWS_WITH_AS(check_run_dir("prog", dir, RunStart::Fresh), doctest::Contains(refusal.c_str()), Error);
  CHECK(run_start(dir, dir + "/checkpoint.safetensors", false) == RunStart::Resume);
  CHECK(run_start(dir, t.file("elsewhere/checkpoint.safetensors"), true) == RunStart::Overwrite);
  CHECK(run_start(dir, "", false) == RunStart::Fresh);
  check_run_dir("prog", dir, RunStart::Resume);
  CHECK_THROWS_WITH_AS(check_run_dir("prog", csv, RunStart::Resume),
                       doctest::Contains("exists and is not a directory"), Error);

  // Resumed at step 20 (the step-30 row came after that checkpoint); a row cut off by a full disk goes too.
  write_bytes(csv, read_bytes(csv) + "4,4");
  { MetricsCsv m("prog", csv, "epoch,step,loss", true, "step", 20); }
  CHECK(read_bytes(csv) == "epoch,step,loss\n1,10,0.5\n2,20,0.4\n");
  CHECK_THROWS_WITH_AS(MetricsCsv("prog", csv, "step,loss", true, "step", 20),
                       doctest::Contains("not this run's header 'step,loss'"), Error);
  fs::remove(csv);  // resuming into a directory without one starts it
  { MetricsCsv m("prog", csv, "epoch,step,loss", true, "step", 20); }
  CHECK(read_bytes(csv) == "epoch,step,loss\n");

  // Overwrite removes the previous run's files, and only those.
  write_bytes(t.file("run/config.txt"), "old");
  write_bytes(t.file("run/mine.txt"), "keep");
  const RunLock lock = open_run_dir("prog", dir, RunStart::Overwrite, {"config.txt", "metrics.csv", "checkpoint.safetensors"});
  CHECK_FALSE(fs::exists(t.file("run/config.txt")));
  CHECK_FALSE(fs::exists(csv));
  CHECK(read_bytes(t.file("run/mine.txt")) == "keep");
}
