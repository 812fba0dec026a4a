#include "linea/nn/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "linea/tensor/atomic_file.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"
#include "linea/tensor/json.h"

namespace linea::nn {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so must the host be");

namespace {

// A safetensors header needs 3 levels; a deeper one is refused (tensor/json.h).
constexpr int kMaxDepth = 8;
using Json = json::Value;
using json::quote;

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
  const Json root = json::parse(text, fmt::format("[load_safetensors] '{}': malformed JSON header", path), kMaxDepth);
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
