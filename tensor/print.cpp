// Tensor printing, following PyTorch's torch/_tensor_str.py: the same value styles, widths,
// summarization, line wrapping at 80 columns and suffixes, so output looks familiar.
#include "linea/tensor/print.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

constexpr int64_t kThreshold = 1000;  // tensors with more elements are summarized
constexpr int64_t kEdgeItems = 3;     // entries kept at each end of a summarized dim
constexpr int kPrecision = 4;
constexpr int64_t kLineWidth = 80;

// Elements [start, start + len) of t along dim d, as a view.
Tensor narrow_view(const Tensor& t, int64_t d, int64_t start, int64_t len) {
  Shape shape = t.shape();
  shape[d] = len;
  return t.as_strided(shape, t.strides(), t.offset() + start * t.strides()[d]);
}

// The part of t that will be shown: all of it, or (summarizing) only the first and last
// kEdgeItems along each longer dim. Gathered on t's device, so only what is shown is copied.
Tensor shown_part(Tensor t, std::vector<bool>& cut, bool summarize) {
  cut.assign(t.dim(), false);
  if (!summarize) return t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = t.shape()[d];
    if (n <= 2 * kEdgeItems) continue;
    Shape shape = t.shape();
    shape[d] = 2 * kEdgeItems;
    Tensor out = empty(shape, t.dtype(), t.device());
    Backend& be = backend(t.device());
    be.copy(narrow_view(t, d, 0, kEdgeItems), narrow_view(out, d, 0, kEdgeItems));
    be.copy(narrow_view(t, d, n - kEdgeItems, kEdgeItems), narrow_view(out, d, kEdgeItems, kEdgeItems));
    cut[d] = true;
    t = out;
  }
  return t;
}

// One style and one width for all values of a tensor, chosen from the values shown: whole
// numbers print as "2.", values spanning more than 1000x (or tiny/huge ones) in scientific
// notation, everything else with 4 decimals. Integers and bools print as they are.
class ValueFormatter {
 public:
  ValueFormatter(DType dtype, const std::vector<double>& values) : dtype_(dtype) {
    if (!is_floating(dtype)) {
      for (double v : values) width_ = std::max(width_, raw(v).size());
      return;
    }
    std::vector<double> finite;  // nonzero finite values decide the style
    for (double v : values)
      if (std::isfinite(v) && v != 0) finite.push_back(v);
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double v : finite) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    sci_mode_ = hi / lo > 1000.0 || hi > 1e8 || (!int_mode_ && lo < 1e-4);
    for (double v : finite) width_ = std::max(width_, raw(v).size());
  }

  size_t width() const { return width_; }
  std::string operator()(double v) const {
    std::string s = raw(v);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  std::string raw(double v) const {
    if (dtype_ == DType::Bool) return v != 0 ? "True" : "False";
    if (!is_floating(dtype_)) return fmt::format("{}", static_cast<int64_t>(v));
    if (sci_mode_) return fmt::format("{:.{}e}", v, kPrecision);
    if (int_mode_) return std::isfinite(v) ? fmt::format("{:.0f}.", v) : fmt::format("{:.0f}", v);
    return fmt::format("{:.{}f}", v, kPrecision);
  }

  DType dtype_;
  bool int_mode_ = true, sci_mode_ = false;
  size_t width_ = 1;
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

// The nested brackets over the shown values (row-major in `values`, with shape `shape`).
struct Layout {
  const std::vector<double>& values;
  const Shape& shape;
  const std::vector<bool>& cut;
  const ValueFormatter& format;

  std::string block(size_t d, int64_t base, int64_t stride, int64_t indent) const {
    const int64_t n = shape[d];
    std::vector<std::string> parts;
    if (d + 1 == shape.size()) {  // a row of values, wrapped to the line width
      for (int64_t i = 0; i < n; ++i) {
        if (cut[d] && i == kEdgeItems) parts.push_back(" ...");
        parts.push_back(format(values[base + i]));
      }
      const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / (format.width() + 2));
      std::vector<std::string> lines;
      for (size_t i = 0; i < parts.size(); i += per_line) {
        auto first = parts.begin() + i, last = parts.begin() + std::min(parts.size(), i + per_line);
        lines.push_back(join(std::vector<std::string>(first, last), ", "));
      }
      return "[" + join(lines, ",\n" + std::string(indent + 1, ' ')) + "]";
    }
    const int64_t inner = stride / n;
    for (int64_t i = 0; i < n; ++i) {
      if (cut[d] && i == kEdgeItems) parts.push_back("...");
      parts.push_back(block(d + 1, base + i * inner, inner, indent + 1));
    }
    // Blank lines between blocks grow with depth, as in PyTorch: one per dim below this one.
    const std::string sep = "," + std::string(shape.size() - d - 1, '\n') + std::string(indent + 1, ' ');
    return "[" + join(parts, sep) + "]";
  }
};

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());

  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back(fmt::format("device='{}'", t.device()));

  std::string body;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + shape_str(t.shape()));
    if (t.dtype() != DType::Float32) suffixes.push_back(fmt::format("dtype={}", t.dtype()));
  } else {
    std::vector<bool> cut;
    Tensor shown = shown_part(t, cut, t.numel() > kThreshold);
    std::vector<double> values = shown.to_vector();
    ValueFormatter format(t.dtype(), values);
    body = t.dim() == 0 ? format(values[0])
                        : Layout{values, shown.shape(), cut, format}.block(0, 0, shown.numel(), indent);
    // float32 (the default), int64 and bool are implied by how the values look.
    if (t.dtype() != DType::Float32 && t.dtype() != DType::Int64 && t.dtype() != DType::Bool)
      suffixes.push_back(fmt::format("dtype={}", t.dtype()));
  }
  if (t.requires_grad()) suffixes.push_back("requires_grad=True");

  // Suffixes go on the last line, or on a line of their own when that line would pass 80 columns.
  std::string s = prefix + body;
  const size_t nl = s.rfind('\n');
  int64_t last_line = static_cast<int64_t>(nl == std::string::npos ? s.size() + 2 : s.size() - nl + 1);
  for (const std::string& suffix : suffixes) {
    const int64_t len = static_cast<int64_t>(suffix.size());
    if (last_line + len + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + suffix;
      last_line = indent + len;
    } else {
      s += ", " + suffix;
      last_line += len + 2;
    }
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace linea
