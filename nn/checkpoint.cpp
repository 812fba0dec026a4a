#include "linea/nn/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string_view>
#include <vector>

#include "linea/tensor/atomic_file.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::nn {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so must the host be");

namespace {

// ---------------------------------------------------------------- a small JSON reader and writer
//
// Only what a safetensors header needs: objects, arrays, strings, integers (plus true/false/null
// so that a foreign header still parses into a clear "unexpected value" error). Every read is
// bounds-checked, nesting is limited, and duplicate keys are an error.

struct Json {
  enum class Kind { Null, Bool, Int, String, Array, Object } kind = Kind::Null;
  int64_t i = 0;
  std::string s;
  struct Member;  // a key and its value; a vector may hold an incomplete type, a std::pair may not
  std::vector<Json> items;      // Array
  std::vector<Member> members;  // Object, in file order
};
struct Json::Member {
  std::string key;
  Json value;
};

constexpr int kMaxDepth = 8;  // a safetensors header needs 3

class JsonParser {
 public:
  JsonParser(const std::string& path, std::string_view text) : path_(path), t_(text) {}

  Json document() {
    Json v = value(0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected characters after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw Error(fmt::format("[load_safetensors] '{}': malformed JSON header at byte {}: {}", path_, p_, what));
  }
  void skip_ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }
  char peek() {
    skip_ws();
    if (p_ >= t_.size()) fail("unexpected end of header");
    return t_[p_];
  }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++p_;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
    const char c = peek();
    Json v;
    if (c == '{') {
      v.kind = Json::Kind::Object;
      ++p_;
      if (peek() == '}') return ++p_, v;
      std::set<std::string> keys;
      do {
        if (peek() != '"') fail("expected a string key");
        std::string key = string();
        if (!keys.insert(key).second) fail(fmt::format("duplicate key \"{}\"", key));
        expect(':');
        v.members.push_back({std::move(key), value(depth + 1)});
      } while (peek() == ',' && ++p_);
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Kind::Array;
      ++p_;
      if (peek() == ']') return ++p_, v;
      do v.items.push_back(value(depth + 1));
      while (peek() == ',' && ++p_);
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::String;
      v.s = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Kind::Int;
      v.i = integer();
    } else if (literal("true") || literal("false")) {
      v.kind = Json::Kind::Bool;
    } else if (!literal("null")) {
      fail(fmt::format("unexpected character 0x{:02x}", static_cast<unsigned char>(c)));
    }
    return v;
  }

  bool literal(std::string_view word) {
    if (t_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  // Integers only (no fraction or exponent: a header has none), range-checked to int64.
  int64_t integer() {
    const bool neg = t_[p_] == '-';
    if (neg) ++p_;
    if (p_ >= t_.size() || t_[p_] < '0' || t_[p_] > '9') fail("expected a digit");
    uint64_t u = 0;
    const uint64_t limit = neg ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      const unsigned d = t_[p_++] - '0';
      if (u > (limit - d) / 10) fail("integer out of the int64 range");
      u = u * 10 + d;
    }
    if (p_ < t_.size() && (t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E')) fail("expected an integer");
    return neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
  }

  unsigned hex4() {
    if (t_.size() - p_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = t_[p_++];
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) fail("bad hex digit in \\u escape");
      v = v * 16 + d;
    }
    return v;
  }

  std::string string() {
    ++p_;  // the opening quote
    std::string out;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      const char c = t_[p_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated string");
      switch (const char e = t_[p_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, codepoint()); break;
        default: fail("bad escape in string");
      }
    }
  }

  // After "\u": one code point, joining a UTF-16 surrogate pair.
  uint32_t codepoint() {
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (!literal("\\u")) fail("high surrogate without its low half");
      const uint32_t lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return cp;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  const std::string& path_;
  std::string_view t_;
  size_t p_ = 0;
};

// A JSON string literal: quotes, backslashes and control characters escaped; other bytes as is.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + '"';
}

// ---------------------------------------------------------------- safetensors dtypes

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypes[] = {{DType::Float32, "F32"}, {DType::Float64, "F64"}, {DType::Int64, "I64"},
                                 {DType::UInt8, "U8"}, {DType::Bool, "BOOL"}};

std::string_view safetensors_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  throw Error(fmt::format("[save_safetensors] no safetensors name for dtype {}", t));
}

// The largest header we accept (the reference implementation's limit too).
constexpr uint64_t kMaxHeader = 100u << 20;

// ---------------------------------------------------------------- header validation

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  int64_t begin, end;
};

class HeaderReader {
 public:
  HeaderReader(const std::string& path, int64_t data_size) : path_(path), data_size_(data_size) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("[load_safetensors] '{}': {}", path_, what));
  }

  // The tensor entries (checked against each other and the data size) and the metadata.
  std::vector<Entry> read(const Json& root, Metadata& metadata) const {
    if (root.kind != Json::Kind::Object) fail("the header is not a JSON object");
    std::vector<Entry> entries;
    for (const auto& [name, v] : root.members) {
      if (name == "__metadata__") {
        if (v.kind != Json::Kind::Object) fail("__metadata__ is not an object");
        for (const auto& [k, s] : v.members) {
          if (s.kind != Json::Kind::String) fail(fmt::format("__metadata__ value of \"{}\" is not a string", k));
          metadata.emplace(k, s.s);
        }
      } else {
        entries.push_back(entry(name, v));
      }
    }
    // No two tensors may share bytes: sorted by offset, each must start at or after the last end.
    std::vector<const Entry*> order;
    for (const Entry& e : entries) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    for (size_t k = 1; k < order.size(); ++k)
      if (order[k]->begin < order[k - 1]->end)
        fail(fmt::format("tensors \"{}\" [{}, {}) and \"{}\" [{}, {}) overlap", order[k - 1]->name,
                         order[k - 1]->begin, order[k - 1]->end, order[k]->name, order[k]->begin, order[k]->end));
    return entries;
  }

 private:
  Entry entry(const std::string& name, const Json& v) const {
    const std::string who = fmt::format("tensor \"{}\"", name);
    if (v.kind != Json::Kind::Object) fail(who + " is not an object");
    const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const auto& [k, m] : v.members) {
      if (k == "dtype") dtype = &m;
      else if (k == "shape") shape = &m;
      else if (k == "data_offsets") offsets = &m;
      else fail(fmt::format("{} has an unknown field \"{}\"", who, k));
    }
    if (!dtype || !shape || !offsets) fail(who + " needs dtype, shape and data_offsets");

    Entry e{name, DType::Float32, {}, 0, 0};
    if (dtype->kind != Json::Kind::String) fail(who + ": dtype is not a string");
    const auto* d = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](auto& x) { return x.name == dtype->s; });
    if (d == std::end(kDTypes))
      fail(fmt::format("{} has dtype \"{}\"; linea reads F32, F64, I64, U8 and BOOL", who, dtype->s));
    e.dtype = d->dtype;

    if (shape->kind != Json::Kind::Array) fail(who + ": shape is not an array");
    for (const Json& s : shape->items) {
      if (s.kind != Json::Kind::Int || s.i < 0) fail(who + ": shape entries must be non-negative integers");
      e.shape.push_back(s.i);
    }
    const std::optional<int64_t> nbytes = checked_nbytes(e.shape, itemsize(e.dtype));
    if (!nbytes) fail(fmt::format("{}: shape {} is impossibly large", who, shape_str(e.shape)));
    const int64_t bytes = *nbytes;

    if (offsets->kind != Json::Kind::Array || offsets->items.size() != 2 ||
        offsets->items[0].kind != Json::Kind::Int || offsets->items[1].kind != Json::Kind::Int)
      fail(who + ": data_offsets must be [begin, end]");
    e.begin = offsets->items[0].i;
    e.end = offsets->items[1].i;
    if (e.begin < 0 || e.end < e.begin || e.end > data_size_)
      fail(fmt::format("{}: data_offsets [{}, {}] out of range for a data section of {} bytes (truncated file?)", who,
                       e.begin, e.end, data_size_));
    if (e.end - e.begin != bytes)
      fail(fmt::format("{}: data_offsets [{}, {}] hold {} bytes, but shape {} {} needs {}", who, e.begin, e.end,
                       e.end - e.begin, shape_str(e.shape), d->name, bytes));
    return e;
  }

  const std::string& path_;
  int64_t data_size_;
};

// A contiguous CPU copy of t, or t itself when it already is one.
Tensor host_contiguous(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  return h.contiguous();
}

}  // namespace

// ---------------------------------------------------------------- public API

void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  std::vector<Tensor> hosts;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      header += quote(k) + ":" + quote(v);
      first = false;
    }
    header += "}";
  }
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // a std::map: sorted by name
    LINEA_CHECK(!name.empty() && name != "__metadata__", "[save_safetensors] '{}': invalid tensor name \"{}\"", path,
                name);
    LINEA_CHECK(t.defined(), "[save_safetensors] '{}': tensor \"{}\" is undefined", path, name);
    hosts.push_back(host_contiguous(t));
    const int64_t bytes = t.numel() * static_cast<int64_t>(itemsize(t.dtype()));
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", quote(name), safetensors_name(t.dtype()),
                          fmt::join(t.shape(), ","), offset, offset + bytes);
    offset += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // pad so that the data starts 8-byte aligned

  const uint64_t n = header.size();
  char len[8];
  std::memcpy(len, &n, 8);
  std::vector<std::string_view> parts{{len, 8}, header};
  for (const Tensor& h : hosts)
    parts.emplace_back(static_cast<const char*>(h.data_ptr()), h.numel() * itemsize(h.dtype()));
  write_file_atomically(path, parts, "save_safetensors");
}

Safetensors load_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  LINEA_CHECK(f.is_open(), "[load_safetensors] cannot open '{}': {}", path, std::strerror(errno));
  const int64_t file_size = static_cast<int64_t>(f.tellg());
  LINEA_CHECK(file_size >= 8, "[load_safetensors] '{}' is truncated: {} bytes, not even the 8-byte header length",
              path, file_size);
  f.seekg(0);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  LINEA_CHECK(f.gcount() == 8, "[load_safetensors] reading '{}' failed", path);
  LINEA_CHECK(n <= kMaxHeader && n <= static_cast<uint64_t>(file_size - 8),
              "[load_safetensors] '{}': header length {} does not fit a file of {} bytes (limit {}): truncated or "
              "not a safetensors file", path, n, file_size, kMaxHeader);
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  LINEA_CHECK(static_cast<uint64_t>(f.gcount()) == n, "[load_safetensors] reading the header of '{}' failed", path);

  const int64_t data_start = 8 + static_cast<int64_t>(n);
  Safetensors out;
  const Json root = JsonParser(path, text).document();
  for (const Entry& e : HeaderReader(path, file_size - data_start).read(root, out.metadata)) {
    Tensor t = empty(e.shape, e.dtype);
    f.seekg(data_start + e.begin);
    f.read(static_cast<char*>(t.data_ptr()), e.end - e.begin);
    LINEA_CHECK(f.gcount() == e.end - e.begin, "[load_safetensors] reading tensor \"{}\" of '{}' failed", e.name,
                path);
    if (e.dtype == DType::Bool) {  // a C++ bool must hold exactly 0 or 1; any nonzero byte is true
      auto* b = static_cast<unsigned char*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel(); ++i) b[i] = b[i] != 0;
    }
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const Metadata& metadata) {
  StateDict all;
  for (auto& [k, t] : model.state_dict()) all.emplace("model." + k, t);
  for (auto& [k, t] : optimizer.state_dict()) all.emplace("optim." + k, t);
  save_safetensors(path, all, metadata);
}

Metadata load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer) {
  Safetensors file = load_safetensors(path);
  StateDict model_sd, optim_sd;
  for (auto& [k, t] : file.tensors) {
    if (k.starts_with("model.")) model_sd.emplace(k.substr(6), t);
    else if (k.starts_with("optim.")) optim_sd.emplace(k.substr(6), t);
    else throw Error(fmt::format("[load_checkpoint] '{}': key \"{}\" is neither model.* nor optim.*", path, k));
  }
  try {
    model.load_state_dict(model_sd);
    optimizer.load_state_dict(optim_sd);
  } catch (const Error& e) {  // say which file did not fit
    throw Error(fmt::format("[load_checkpoint] '{}': {}", path, e.what()));
  }
  return std::move(file.metadata);
}

}  // namespace linea::nn
