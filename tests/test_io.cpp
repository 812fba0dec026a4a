// Input and output: .npy files (round trips, NumPy interop when python3 + numpy are there, broken
// files) and printing.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"

using namespace linea;
using linea::testing::read_bytes;
using linea::testing::write_bytes;
namespace fs = std::filesystem;

namespace {

// A fresh directory for this process's files, removed at exit.
const testing::TempDir& tmp() {
  static testing::TempDir d("io");
  return d;
}

// A hand-made .npy 1.0 file: header dict as given, then `data`.
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string s = "\x93NUMPY";
  s += '\x01';
  s += '\x00';
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>(header.size() >> 8);
  return s + header + data;
}

void check_round_trip(const Tensor& t) {
  const std::string path = tmp().file("round_trip.npy");
  save_npy(path, t);
  Tensor back = load_npy(path);
  CHECK(back.shape() == t.shape());
  CHECK(back.dtype() == t.dtype());
  CHECK(back.is_contiguous());
  CHECK(back.to_vector() == t.to_vector());
}

bool have_numpy() {
  static const bool ok = std::system("python3 -c 'import numpy' > /dev/null 2>&1") == 0;
  return ok;
}

int python(const std::string& code) { return std::system(fmt::format("python3 -c \"{}\"", code).c_str()); }

}  // namespace

TEST_CASE("npy: round trips for every dtype and shape") {
  Generator g(3);
  check_round_trip(randn({2, 3, 4}, g, float32));
  check_round_trip(randn({5}, g, float64));
  check_round_trip(randint(-1000000, 1000000, {3, 2}, g));
  check_round_trip(tril_mask(3, 4));
  check_round_trip(from_vector(std::vector<uint8_t>{0, 7, 255}));
  check_round_trip(scalar(2.5, float64));   // 0-d: shape ()
  check_round_trip(zeros({0, 3}, float32));  // empty
}

TEST_CASE("npy: non-contiguous tensors are saved in C order") {
  Tensor base = arange(0.0, 12.0, 1.0, float64);
  Tensor transposed = base.as_strided({4, 3}, {1, 4}, 0);  // the transpose of a 3x4 matrix
  REQUIRE_FALSE(transposed.is_contiguous());
  check_round_trip(transposed);
  Tensor strided = base.as_strided({2, 2}, {6, 2}, 1);  // a sliced view with an offset
  check_round_trip(strided);
  CHECK(load_npy(tmp().file("round_trip.npy")).to_vector() == std::vector<double>{1, 3, 7, 9});
}

TEST_CASE("npy: the written header is what numpy writes") {
  const std::string path = tmp().file("header.npy");
  save_npy(path, zeros({2, 3}, float32));
  const std::string bytes = read_bytes(path);
  const size_t data_start = bytes.size() - 2 * 3 * 4;
  CHECK(data_start == 128);  // 10 bytes of prelude + a 60-byte dict, padded to a 64-byte boundary
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") == 10);
  CHECK(bytes[data_start - 1] == '\n');
  CHECK(bytes.substr(70, data_start - 71) == std::string(data_start - 71, ' '));

  save_npy(path, arange(3));
  CHECK(read_bytes(path).find("'descr': '<i8', 'fortran_order': False, 'shape': (3,), }") != std::string::npos);
}

TEST_CASE("npy: broken files are clear errors naming the file") {
  const std::string path = tmp().file("bad.npy");
  auto check_bad = [&](const std::string& bytes, const char* why) {
    write_bytes(path, bytes);
    CHECK_THROWS_WITH_AS(load_npy(path), doctest::Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(load_npy(path), doctest::Contains(why), Error);
  };
  const std::string good =
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", std::string(32, '\0'));

  check_bad("", "not a .npy file");
  check_bad("hello world, not numpy", "not a .npy file");
  check_bad(good.substr(0, 9), "truncated");                 // inside the header length
  check_bad(good.substr(0, 40), "truncated");                // inside the header
  check_bad(good.substr(0, good.size() - 1), "truncated");   // one data byte short
  check_bad(good + "xx", "corrupted");                       // trailing bytes
  check_bad(npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", std::string(32, '\0')),
            "Fortran-order");
  check_bad(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')),
            "unsupported dtype '<i4'");
  check_bad(npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
            "big-endian");
  check_bad(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -2), }", ""), "bad dimension");
  check_bad(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2 2), }", ""), "malformed shape");
  check_bad(npy_bytes("{'descr': '<f8', 'fortran_order': False, }", ""), "no 'shape' entry");
  check_bad(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"), "dtype string");
  check_bad(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", ""),
            "impossibly large");
  std::string bad_version = good;
  bad_version[6] = 9;
  check_bad(bad_version, "version 9");

  CHECK_THROWS_WITH_AS(load_npy(tmp().file("missing.npy")), doctest::Contains("cannot open"), Error);
  CHECK_THROWS_WITH_AS(save_npy(tmp().file("no/such/dir/x.npy"), zeros({1})), doctest::Contains("[save_npy]"), Error);
  CHECK_THROWS_WITH_AS(save_npy(path, Tensor()), doctest::Contains("undefined"), Error);

  // Bool bytes other than 0/1 read as true.
  write_bytes(path,
              npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x01\x05", 3)));
  CHECK(load_npy(path).to_vector() == std::vector<double>{0, 1, 1});
}

TEST_CASE("npy: a shape whose size overflows int64 is refused, also beside a 0 dim") {
  const std::string path = tmp().file("huge.npy");
  for (const char* shape : {"(0, 4611686018427387904, 4)", "(4611686018427387904, 0, 4)",
                            "(4294967295, 4294967295, 4294967295, 0)", "(2305843009213693952,)"}) {
    CAPTURE(shape);
    write_bytes(path, npy_bytes(fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape), ""));
    CHECK_THROWS_WITH_AS(load_npy(path), doctest::Contains("impossibly large"), Error);
  }
  write_bytes(path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776), }", ""));
  CHECK(load_npy(path).shape() == Shape{0, int64_t{1} << 40});  // empty, with strides that fit
}

TEST_CASE("npy: numpy reads what linea writes, linea reads what numpy writes") {
  if (!have_numpy()) {
    MESSAGE("skipping NumPy interop: python3 with numpy is not available");
    return;
  }
  const std::string from_np = tmp().file("from_numpy.npy");
  const std::string from_np_f = tmp().file("from_numpy_fortran.npy");
  REQUIRE(python(fmt::format("import numpy as np; np.save('{}', np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8)",
                             from_np)) == 0);
  Tensor a = load_npy(from_np);
  CHECK(a.shape() == Shape{2, 3, 4});
  CHECK(a.dtype() == float32);
  for (int64_t i = 0; i < 24; ++i) CHECK(a.to_vector()[i] == i / 8.0);

  for (const char* np_type : {"int64", "bool", "uint8", "float64"}) {
    REQUIRE(python(fmt::format("import numpy as np; np.save('{}', (np.arange(6) % 3).astype(np.{}))", from_np,
                               np_type)) == 0);
    const double two = std::string(np_type) == "bool" ? 1 : 2;  // bool(2) is true
    CHECK(load_npy(from_np).to_vector() == std::vector<double>{0, 1, two, 0, 1, two});
  }
  // numpy saves a transposed array in Fortran order: a clear error, not scrambled data.
  REQUIRE(python(fmt::format("import numpy as np; np.save('{}', np.ones((2, 3)).T)", from_np_f)) == 0);
  CHECK_THROWS_WITH_AS(load_npy(from_np_f), doctest::Contains("Fortran-order"), Error);

  const std::string to_np = tmp().file("to_numpy.npy");
  Tensor t = arange(0.0, 12.0, 1.0, float64).as_strided({4, 3}, {1, 4}, 0);  // non-contiguous
  save_npy(to_np, t);
  CHECK(python(fmt::format("import numpy as np; a = np.load('{}'); "
                           "assert a.dtype == np.float64 and a.shape == (4, 3), a; "
                           "assert (a == np.arange(12.0).reshape(3, 4).T).all(), a",
                           to_np)) == 0);
  save_npy(to_np, tril_mask(2, 2));
  CHECK(python(fmt::format("import numpy as np; a = np.load('{}'); "
                           "assert a.dtype == np.bool_ and a.tolist() == [[True, False], [True, True]], a",
                           to_np)) == 0);
  save_npy(to_np, scalar(-3, int64));
  CHECK(python(fmt::format(
            "import numpy as np; a = np.load('{}'); assert a.dtype == np.int64 and a.shape == () and a == -3",
            to_np)) == 0);
}

TEST_CASE("printing: PyTorch's layout") {
  CHECK(fmt::format("{}", from_vector(std::vector<double>{1, 2.5, 3, 4}, {2, 2})) ==
        "tensor([[1.0000, 2.5000],\n"
        "        [3.0000, 4.0000]], dtype=float64)");
  CHECK(fmt::format("{}", from_vector(std::vector<float>{1, 2, 3})) == "tensor([1., 2., 3.])");
  CHECK(fmt::format("{}", arange(5)) == "tensor([0, 1, 2, 3, 4])");
  CHECK(fmt::format("{}", from_vector(std::vector<uint8_t>{1, 255})) == "tensor([  1, 255], dtype=uint8)");
  CHECK(fmt::format("{}", tril_mask(2, 2)) ==
        "tensor([[ True, False],\n"
        "        [ True,  True]])");
  CHECK(fmt::format("{}", scalar(3.5)) == "tensor(3.5000)");
  CHECK(fmt::format("{}", ones({2}).requires_grad_()) == "tensor([1., 1.], requires_grad=True)");
  CHECK(fmt::format("{}", from_vector(std::vector<float>{-1.5f, NAN, INFINITY})) ==
        "tensor([-1.5000,     nan,     inf])");
  CHECK(fmt::format("{}", zeros({3})) == "tensor([0., 0., 0.])");
  // Values spanning more than 1000x switch to scientific notation.
  CHECK(fmt::format("{}", from_vector(std::vector<double>{1e-5, 1.0})) ==
        "tensor([1.0000e-05, 1.0000e+00], dtype=float64)");
  // 3-d: a blank line between the 2-d blocks.
  CHECK(fmt::format("{}", arange(8).as_strided({2, 2, 2}, {4, 2, 1}, 0)) ==
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]])");
  // Empty tensors.
  CHECK(fmt::format("{}", zeros({0})) == "tensor([])");
  CHECK(fmt::format("{}", zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(fmt::format("{}", zeros({0}, int64)) == "tensor([], dtype=int64)");
  // A non-contiguous view prints its own elements.
  CHECK(fmt::format("{}", arange(6).as_strided({3, 2}, {1, 3}, 0)) ==
        "tensor([[0, 3],\n"
        "        [1, 4],\n"
        "        [2, 5]])");
  // std::ostream agrees with fmt.
  std::ostringstream os;
  os << arange(3);
  CHECK(os.str() == "tensor([0, 1, 2])");
  CHECK(fmt::format("{}", Tensor()) == "tensor(undefined)");
}

TEST_CASE("printing: long rows wrap at 80 columns, big tensors are summarized") {
  CHECK(fmt::format("{}", arange(30)) ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
        "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
  CHECK(fmt::format("{}", arange(2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(fmt::format("{}", zeros({100, 100})) ==
        "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
        "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
        "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
        "        ...,\n"
        "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
        "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
        "        [0., 0., 0.,  ..., 0., 0., 0.]])");
  // Only the dims longer than 6 are cut; the rest print whole.
  CHECK(fmt::format("{}", arange(2000).as_strided({2, 1000}, {1000, 1}, 0)) ==
        "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n"
        "        [1000, 1001, 1002,  ..., 1997, 1998, 1999]])");
}
