#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/sampling.h"

namespace linea::data {

namespace {

// An IDX file opened for reading, gunzipped on the fly when it is gzip (zlib's gzread passes
// plain files through as they are).
class IdxStream {
 public:
  explicit IdxStream(const std::string& path) : path_(path) {
    LINEA_CHECK(std::filesystem::exists(path), "[idx] no such file: {}", path);
    LINEA_CHECK(std::filesystem::is_regular_file(path), "[idx] {} is not a regular file", path);
    f_ = gzopen(path.c_str(), "rb");
    LINEA_CHECK(f_ != nullptr, "[idx] cannot open {}", path);
  }
  ~IdxStream() { gzclose(f_); }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  // Up to n bytes into p; fewer only at the end of the data.
  size_t read(void* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      const int r = gzread(f_, static_cast<char*>(p) + got, static_cast<unsigned>(std::min<size_t>(n - got, 1 << 30)));
      if (r <= 0) {
        // A cut-off stream ends with 0 too: only gzerror tells it from a clean end.
        int err = Z_OK;
        const char* msg = gzerror(f_, &err);
        LINEA_CHECK(r == 0 && err == Z_OK, "[idx] {}: broken gzip data: {}", path_, msg);
        break;
      }
      got += static_cast<size_t>(r);
    }
    return got;
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path) {
  IdxStream in(path);
  unsigned char head[4 + 4 * 255];
  const size_t got = in.read(head, 4);
  LINEA_CHECK(got == 4 && head[0] == 0 && head[1] == 0, "[idx] {}: not an IDX file (bad magic number)", path);
  LINEA_CHECK(head[2] == 0x08, "[idx] {}: element type 0x{:02x} is not supported (only 0x08, unsigned byte)", path,
              head[2]);
  const int ndim = head[3];
  LINEA_CHECK(ndim >= 1, "[idx] {}: header declares 0 dims", path);
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  const size_t dims_got = in.read(head + 4, header - 4);
  LINEA_CHECK(dims_got == header - 4, "[idx] {}: truncated header ({} dims need {} bytes, file has {})", path, ndim,
              header, 4 + dims_got);
  Shape shape(ndim);
  for (int d = 0; d < ndim; ++d) shape[d] = big_endian_u32(head + 4 + 4 * d);
  const std::optional<int64_t> need = checked_nbytes(shape, 1);
  LINEA_CHECK(need.has_value(), "[idx] {}: dims {} are impossibly large", path, shape_str(shape));

  // Inflate no more than the header declares, into a buffer that grows only as data arrives: the
  // memory used is bounded by both the declared size and what the file really holds (a gzip
  // bomb stops at the first byte past its dims; a header claiming terabytes fails at its end).
  std::vector<unsigned char> data;
  for (size_t have = 0; have < static_cast<size_t>(*need);) {
    data.resize(std::min<size_t>(*need, std::max<size_t>(2 * data.size(), 1 << 16)));
    have += in.read(data.data() + have, data.size() - have);
    LINEA_CHECK(have == data.size(), "[idx] {}: dims {} need {} data bytes, file has {} (truncated)", path,
                shape_str(shape), *need, have);
  }
  unsigned char extra;
  LINEA_CHECK(in.read(&extra, 1) == 0, "[idx] {}: more data than the {} bytes its dims {} declare", path, *need,
              shape_str(shape));
  Tensor t = empty(shape, DType::UInt8);
  if (*need > 0) std::memcpy(t.data<uint8_t>(), data.data(), data.size());
  return t;
}

ImageDataset load_fashion_mnist(const std::string& split, const std::string& data_dir) {
  LINEA_CHECK(split == "train" || split == "test", "[fashion_mnist] split must be \"train\" or \"test\", got \"{}\"",
              split);
  const std::filesystem::path dir = data_dir.empty() ? kFashionMnistDir : data_dir;
  const std::string prefix = split == "train" ? "train" : "t10k";
  // The package ships .gz files; a hand-made data dir may hold them unpacked.
  auto find = [&](const std::string& name) {
    for (const auto& candidate : {dir / (name + ".gz"), dir / name})
      if (std::filesystem::exists(candidate)) return candidate.string();
    throw Error(fmt::format(
        "[fashion_mnist] missing {} (or {}). Install the dataset with `sudo apt-get install "
        "dataset-fashion-mnist`, or pass --data-dir DIR holding the Fashion-MNIST IDX files",
        (dir / (name + ".gz")).string(), name));
  };
  const std::string images_path = find(prefix + "-images-idx3-ubyte");
  const std::string labels_path = find(prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
  LINEA_CHECK(images.dim() == 3 && images.size(1) == 28 && images.size(2) == 28,
              "[fashion_mnist] {}: expected images of shape (N, 28, 28), got {}", images_path,
              shape_str(images.shape()));
  LINEA_CHECK(labels.dim() == 1 && labels.size(0) == images.size(0),
              "[fashion_mnist] {}: expected {} labels, got shape {}", labels_path, images.size(0),
              shape_str(labels.shape()));
  const uint8_t* pl = labels.data<uint8_t>();
  for (int64_t i = 0; i < labels.numel(); ++i)
    LINEA_CHECK(pl[i] < 10, "[fashion_mnist] {}: label {} at index {} is not a class 0..9", labels_path, pl[i], i);
  return {images, labels.to(DType::Int64)};
}

PixelStats pixel_stats(const Tensor& images) {
  LINEA_CHECK(images.dtype() == DType::UInt8 && images.numel() > 0,
              "[pixel_stats] expected non-empty uint8 images, got {} of shape {}", images.dtype(),
              shape_str(images.shape()));
  const Tensor c = images.contiguous();
  const uint8_t* p = c.data<uint8_t>();
  // Exact integer sums: 60000*784 pixels would lose digits in a float accumulator.
  uint64_t s = 0, ss = 0;
  for (int64_t i = 0; i < c.numel(); ++i) s += p[i], ss += uint64_t{p[i]} * p[i];
  const double n = static_cast<double>(c.numel());
  const double mean = s / n / 255.0;
  return {mean, std::sqrt(std::max(0.0, ss / n / (255.0 * 255.0) - mean * mean))};
}

Tensor normalize_images(const Tensor& images, PixelStats stats) {
  LINEA_CHECK(images.dtype() == DType::UInt8 && (images.dim() == 3 || images.dim() == 4),
              "[normalize_images] expected uint8 [N, H, W] or [N, C, H, W], got {} of shape {}", images.dtype(),
              shape_str(images.shape()));
  LINEA_CHECK(stats.std > 0, "[normalize_images] std must be positive, got {}", stats.std);
  const Tensor c = images.contiguous();
  Shape shape = c.shape();
  if (shape.size() == 3) shape.insert(shape.begin() + 1, 1);
  Tensor out = empty(shape, DType::Float32);
  const uint8_t* p = c.data<uint8_t>();
  float* o = out.data<float>();
  // A 256-entry table: every pixel value maps to one float.
  float table[256];
  for (int v = 0; v < 256; ++v) table[v] = static_cast<float>((v / 255.0 - stats.mean) / stats.std);
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = table[p[i]];
  return out;
}

Tensor pad_images(const Tensor& images, int64_t pad, double value) {
  LINEA_CHECK(images.dim() >= 2 && pad >= 0, "[pad_images] needs [..., H, W] and pad >= 0, got shape {} and pad {}",
              shape_str(images.shape()), pad);
  const Tensor c = images.contiguous();
  const int64_t h = c.size(-2), w = c.size(-1), planes = c.numel() / std::max<int64_t>(1, h * w);
  Shape shape = c.shape();
  shape[shape.size() - 2] += 2 * pad;
  shape[shape.size() - 1] += 2 * pad;
  Tensor out = full(shape, value, c.dtype());
  const int64_t ow = w + 2 * pad, oplane = (h + 2 * pad) * ow;
  dispatch(c.dtype(), [&]<class T>() {
    const T* src = c.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < planes; ++i)
      for (int64_t y = 0; y < h; ++y)
        std::memcpy(dst + i * oplane + (y + pad) * ow + pad, src + (i * h + y) * w, w * sizeof(T));
  });
  return out;
}

Tensor random_crop_flip(const Tensor& batch, const AugmentOptions& opts, Generator& gen) {
  LINEA_CHECK(batch.dim() >= 3 && opts.pad >= 0,
              "[random_crop_flip] needs a batch [N, ..., H, W] and pad >= 0, got shape {} and pad {}",
              shape_str(batch.shape()), opts.pad);
  const Tensor c = batch.contiguous();
  const int64_t n = c.size(0), h = c.size(-2), w = c.size(-1);
  const int64_t planes = n == 0 ? 0 : c.numel() / (n * h * w);  // channels per image
  Tensor out = empty(c.shape(), c.dtype());
  dispatch(c.dtype(), [&]<class T>() {
    const T fill = static_cast<T>(opts.fill);
    for (int64_t i = 0; i < n; ++i) {
      // Out pixel (y, x) reads in pixel (y + dy, x + dx), or its mirror image across the width.
      const int64_t dy = random_below(gen, 2 * opts.pad + 1) - opts.pad;
      const int64_t dx = random_below(gen, 2 * opts.pad + 1) - opts.pad;
      const bool flip = opts.flip && random_below(gen, 2) == 1;
      for (int64_t p = 0; p < planes; ++p) {
        const T* src = c.data<T>() + (i * planes + p) * h * w;
        T* dst = out.data<T>() + (i * planes + p) * h * w;
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x) {
            const int64_t sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
            dst[y * w + x] = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? src[sy * w + sx] : fill;
          }
      }
    }
  });
  return out;
}

}  // namespace linea::data
