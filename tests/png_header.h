// A PNG's signature and size, read from its first chunk (IHDR), without libpng: enough to check
// that a file some tool wrote is a PNG of the promised size.
#pragma once
#include <cstdint>
#include <string>

#include "helpers.h"

namespace linea::testing {

struct PngHeader {
  bool valid = false;  // the 8-byte signature, then an IHDR chunk of 13 bytes
  uint32_t width = 0, height = 0;
};

inline PngHeader read_png_header(const std::string& path) {
  const std::string b = read_bytes(path);
  PngHeader h;
  if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(8, 8, std::string("\0\0\0\x0dIHDR", 8)) != 0)
    return h;
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | uint8_t(b[at + i]);
    return v;
  };
  h.valid = true;
  h.width = be32(16), h.height = be32(20);
  return h;
}

}  // namespace linea::testing
