// Small helpers shared by the test files.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <linea/linea.h>
#include <linea/tensor/backend.h>  // the kernel interface: the tests call kernels directly too

namespace linea::testing {

// A float64 leaf with N(0,1) entries from its own seeded generator.
inline Tensor randn64(Shape shape, uint64_t seed, bool requires_grad = true) {
  Generator g(seed);
  Tensor t = randn(std::move(shape), g, DType::Float64);
  if (requires_grad) t.requires_grad_();
  return t;
}

// A rows x cols gemm operand stored with leading dimension ld = its row length + pad (so a kernel
// that ignores ld is caught), transposed when `trans`: element (i, j) at v[j*ld + i]. Values from
// a seeded LCG: multiples of 1/scale in [-10000/scale, 10000/scale].
struct GemmOperand {
  bool trans;
  int64_t rows, cols, ld;
  std::vector<float> v;
  GemmOperand(bool t, int64_t r, int64_t c, uint32_t seed, int64_t pad, float scale)
      : trans(t), rows(r), cols(c), ld((t ? r : c) + pad) {
    v.resize(size_t((t ? c : r) * ld));
    uint64_t s = seed * 2654435761u + 1;
    for (float& x : v) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = float(int64_t(s >> 40) % 20001 - 10000) / scale;
    }
  }
  float at(int64_t i, int64_t j) const { return trans ? v[j * ld + i] : v[i * ld + j]; }
};

// Elementwise |a - b| <= atol + rtol * |b|, same shapes; reports the worst element.
inline bool allclose(const Tensor& a, const Tensor& b, double atol = 1e-6, double rtol = 1e-5) {
  if (a.shape() != b.shape()) {
    MESSAGE("shape mismatch: " << shape_str(a.shape()) << " vs " << shape_str(b.shape()));
    return false;
  }
  auto va = a.to_vector(), vb = b.to_vector();
  for (size_t i = 0; i < va.size(); ++i) {
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i]))) {
      MESSAGE("element " << i << ": " << va[i] << " vs " << vb[i]);
      return false;
    }
  }
  return true;
}

// A fresh scratch directory (tagged with the test's name and this process), removed when it goes
// out of scope; file(name) is a path inside it.
struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& tag) {
    static int n = 0;
    dir = std::filesystem::temp_directory_path() / fmt::format("linea_test_{}_{}_{}", tag, ::getpid(), n++);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::remove(path);  // a new file: rewriting one in place makes ext4 flush it (~5 ms a time)
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace linea::testing

// CHECK_GRADCHECK(f, {x, y}) — gradcheck with the failure report shown by doctest.
#define CHECK_GRADCHECK(f, ...)                                  \
  do {                                                           \
    auto linea_gc_ = ::linea::gradcheck((f), __VA_ARGS__);       \
    INFO(linea_gc_.message);                                     \
    CHECK(linea_gc_.ok);                                         \
  } while (0)
