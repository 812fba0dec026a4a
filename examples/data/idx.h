// Fashion-MNIST: the IDX file format (gzip or raw), the loader, and the image helpers the ViT
// example uses (normalisation, padding, random-crop + flip augmentation).
//
// IDX (LeCun's MNIST format): 2 zero bytes, a type byte (0x08 = unsigned byte), the number of
// dims, then each dim as a big-endian uint32, then the data in row-major order.
#pragma once
#include <string>

#include <linea/linea.h>

namespace linea::data {

// Where Debian's `dataset-fashion-mnist` package puts the four .gz files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Reads an unsigned-byte IDX file (gzip-compressed or not) into a uint8 tensor of its dims.
// Throws a linea::Error naming the file for a bad magic, type, dims or size.
Tensor read_idx(const std::string& path);

struct ImageDataset {
  Tensor images;  // uint8 [N, 28, 28], pixels 0..255
  Tensor labels;  // int64 [N], classes 0..9
};

// split "train" (60000 images) or "test" (10000). data_dir "" means kFashionMnistDir; it may hold
// the files gzipped (as the package does) or not. Missing files: the error names the package.
ImageDataset load_fashion_mnist(const std::string& split, const std::string& data_dir = "");

// Mean and standard deviation of all pixels, in [0, 1] units (compute them on the train set).
struct PixelStats {
  double mean = 0;
  double std = 1;
};
PixelStats pixel_stats(const Tensor& images);

// uint8 [N, H, W] or [N, C, H, W] -> float32 [N, C, H, W] (C = 1 added) of (x / 255 - mean) / std.
Tensor normalize_images(const Tensor& images, PixelStats stats);

// Pads the last two dims by `pad` on every side with `value` (any dtype, e.g. 28x28 -> 32x32).
Tensor pad_images(const Tensor& images, int64_t pad, double value = 0);

// Random translation by up to `pad` pixels in each direction, the uncovered border filled with
// `fill` (the same as padding by `pad` and cropping back at a random offset), then a horizontal
// flip with probability 1/2 when `flip`. Works on a batch [N, ..., H, W]; returns a new tensor.
struct AugmentOptions {
  int64_t pad = 2;
  bool flip = true;
  double fill = 0;  // for normalised images: the normalised value of a black pixel
};
Tensor random_crop_flip(const Tensor& batch, const AugmentOptions& opts, Generator& gen);

}  // namespace linea::data
