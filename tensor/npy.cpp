// .npy files. The format (numpy.lib.format): the magic "\x93NUMPY", a version (major, minor), the
// header length (uint16 little-endian in 1.0, uint32 in 2.0 and 3.0), an ASCII Python dict such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and ended by '\n'
// so the data starts on a 64-byte boundary, then the raw elements in C order.
#include "linea/tensor/npy.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <vector>

#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

static_assert(std::endian::native == std::endian::little, "the .npy code writes and reads host byte order");

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::Int64: return "<i8";
    case DType::Bool: return "|b1";
    case DType::UInt8: return "|u1";
  }
  throw Error("[save_npy] unknown dtype");
}

DType dtype_of_descr(const std::string& path, const std::string& descr) {
  for (DType t : {DType::Float32, DType::Float64, DType::Int64, DType::Bool, DType::UInt8})
    if (descr == descr_of(t)) return t;
  LINEA_CHECK(descr.empty() || descr[0] != '>', "[load_npy] '{}': big-endian data ('{}') is not supported", path,
              descr);
  throw Error(fmt::format("[load_npy] '{}': unsupported dtype '{}' (supported: <f4, <f8, <i8, |b1, |u1)", path, descr));
}

// A tiny reader for the header dict: finds `'key':` and parses the value after it.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& header) : path_(path), h_(header) {}

  std::string string_value(const std::string& key) {
    seek(key);
    const char quote = peek();
    LINEA_CHECK(quote == '\'' || quote == '"', "[load_npy] '{}': '{}' is not a plain dtype string in header {}", path_,
                key, h_);
    const size_t end = h_.find(quote, p_ + 1);
    LINEA_CHECK(end != std::string::npos, "[load_npy] '{}': unterminated string in header {}", path_, h_);
    return h_.substr(p_ + 1, end - p_ - 1);
  }

  bool bool_value(const std::string& key) {
    seek(key);
    if (h_.compare(p_, 4, "True") == 0) return true;
    if (h_.compare(p_, 5, "False") == 0) return false;
    throw Error(fmt::format("[load_npy] '{}': '{}' is neither True nor False in header {}", path_, key, h_));
  }

  Shape tuple_value(const std::string& key) {
    seek(key);
    LINEA_CHECK(peek() == '(', "[load_npy] '{}': '{}' is not a tuple in header {}", path_, key, h_);
    ++p_;
    Shape shape;
    while (true) {
      if (peek() == ')') return shape;
      int64_t v = -1;
      auto [next, ec] = std::from_chars(h_.data() + p_, h_.data() + h_.size(), v);
      LINEA_CHECK(ec == std::errc() && v >= 0, "[load_npy] '{}': bad dimension in shape of header {}", path_, h_);
      shape.push_back(v);
      p_ = next - h_.data();
      if (peek() == ',') ++p_;
      else LINEA_CHECK(peek() == ')', "[load_npy] '{}': malformed shape in header {}", path_, h_);
    }
  }

 private:
  // Moves past `'key':` and any spaces.
  void seek(const std::string& key) {
    size_t k = h_.find("'" + key + "'");
    if (k == std::string::npos) k = h_.find("\"" + key + "\"");
    LINEA_CHECK(k != std::string::npos, "[load_npy] '{}': header has no '{}' entry: {}", path_, key, h_);
    p_ = k + key.size() + 2;
    LINEA_CHECK(peek() == ':', "[load_npy] '{}': expected ':' after '{}' in header {}", path_, key, h_);
    ++p_;
    peek();
  }
  // The next non-space character ('\0' at the end), leaving p_ on it.
  char peek() {
    while (p_ < h_.size() && std::isspace(static_cast<unsigned char>(h_[p_]))) ++p_;
    return p_ < h_.size() ? h_[p_] : '\0';
  }

  const std::string& path_;
  const std::string& h_;
  size_t p_ = 0;
};

}  // namespace

void save_npy(const std::string& path, const Tensor& t) {
  LINEA_CHECK(t.defined(), "[save_npy] '{}': cannot save an undefined tensor", path);
  // Gather a non-contiguous view into C order first (on its own device).
  Tensor src = t;
  if (!t.is_contiguous()) {
    src = empty(t.shape(), t.dtype(), t.device());
    backend(t.device()).copy(t, src);
  }
  const size_t nbytes = static_cast<size_t>(src.numel()) * itemsize(src.dtype());
  std::vector<char> host;
  const char* data = static_cast<const char*>(src.data_ptr());
  if (!src.device().is_cpu()) {
    host.resize(nbytes);
    backend(src.device()).copy_to_host(host.data(), *src.storage(), src.offset() * itemsize(src.dtype()), nbytes);
    data = host.data();
  }

  // shape_str writes Python tuple syntax: (), (3,), (2, 3).
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(t.dtype()),
                                   shape_str(t.shape()));
  const size_t prelude = sizeof(kMagic) + 2 + 2;  // magic, version, uint16 header length
  header.append(63 - (prelude + header.size()) % 64, ' ');
  header += '\n';
  LINEA_CHECK(header.size() <= 65535, "[save_npy] '{}': shape {} is too long for a .npy 1.0 header", path,
              shape_str(t.shape()));
  const uint16_t header_len = static_cast<uint16_t>(header.size());

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  LINEA_CHECK(f.is_open(), "[save_npy] cannot open '{}' for writing: {}", path, std::strerror(errno));
  const char version[2] = {1, 0};
  f.write(kMagic, sizeof(kMagic));
  f.write(version, 2);
  f.write(reinterpret_cast<const char*>(&header_len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(data, static_cast<std::streamsize>(nbytes));
  f.close();
  LINEA_CHECK(!f.fail(), "[save_npy] writing '{}' failed (disk full?)", path);
}

Tensor load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  LINEA_CHECK(f.is_open(), "[load_npy] cannot open '{}': {}", path, std::strerror(errno));
  const int64_t file_size = static_cast<int64_t>(f.tellg());
  f.seekg(0);

  // Magic and version.
  char prelude[8] = {};
  f.read(prelude, 8);
  LINEA_CHECK(f.gcount() == 8 && std::memcmp(prelude, kMagic, sizeof(kMagic)) == 0,
              "[load_npy] '{}' is not a .npy file (no \\x93NUMPY magic at its start)", path);
  const int major = static_cast<unsigned char>(prelude[6]);
  LINEA_CHECK(major >= 1 && major <= 3, "[load_npy] '{}': unsupported .npy format version {}.{}", path, major,
              static_cast<int>(prelude[7]));

  // Header length: 2 bytes in version 1, 4 bytes after.
  uint32_t header_len = 0;
  const int len_bytes = major == 1 ? 2 : 4;
  f.read(reinterpret_cast<char*>(&header_len), len_bytes);
  LINEA_CHECK(f.gcount() == len_bytes, "[load_npy] '{}' is truncated inside its header", path);
  const int64_t data_start = 8 + len_bytes + static_cast<int64_t>(header_len);
  LINEA_CHECK(data_start <= file_size, "[load_npy] '{}' is truncated: header of {} bytes, file of {} bytes", path,
              header_len, file_size);
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);

  HeaderParser parser(path, header);
  const DType dtype = dtype_of_descr(path, parser.string_value("descr"));
  LINEA_CHECK(!parser.bool_value("fortran_order"),
              "[load_npy] '{}': Fortran-order arrays are not supported (save np.ascontiguousarray(a) instead)", path);
  const Shape shape = parser.tuple_value("shape");

  // The data must be exactly numel * itemsize bytes; check before allocating anything.
  const std::optional<int64_t> nbytes = checked_nbytes(shape, itemsize(dtype));
  LINEA_CHECK(nbytes.has_value(), "[load_npy] '{}': shape {} is impossibly large", path, shape_str(shape));
  const int64_t expected = *nbytes;
  const int64_t found = file_size - data_start;
  LINEA_CHECK(found >= expected, "[load_npy] '{}' is truncated: shape {} {} needs {} bytes of data, the file has {}",
              path, shape_str(shape), dtype, expected, found);
  LINEA_CHECK(found == expected, "[load_npy] '{}' is corrupted: {} bytes of data for shape {} {}, expected {}", path,
              found, shape_str(shape), dtype, expected);

  Tensor t = empty(shape, dtype);
  f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(expected));
  LINEA_CHECK(f.gcount() == expected, "[load_npy] reading the data of '{}' failed", path);
  if (dtype == DType::Bool) {  // any nonzero byte means true; a C++ bool must hold exactly 0 or 1
    auto* b = static_cast<unsigned char*>(t.data_ptr());
    for (int64_t i = 0; i < expected; ++i) b[i] = b[i] != 0;
  }
  return t;
}

}  // namespace linea
