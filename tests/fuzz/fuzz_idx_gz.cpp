// read_idx on arbitrary IDX bytes gzipped by the harness: the inflate path sees well-formed gzip
// around hostile headers and sizes (say a small header before far more data than it declares).
// A file that loads holds exactly the input's data after its header.
#include <zlib.h>

#include <vector>

#include "data/idx.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const linea::fuzz::InputFile in("idx_gz");
  // A gzip member: deflateInit2 with 16 + MAX_WBITS writes the gzip header and trailer.
  z_stream z{};
  linea::fuzz::require(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
  std::vector<uint8_t> gz(deflateBound(&z, size));
  z.next_in = const_cast<uint8_t*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = gz.data();
  z.avail_out = static_cast<uInt>(gz.size());
  linea::fuzz::require(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
  gz.resize(z.total_out);
  deflateEnd(&z);
  try {
    const linea::Tensor t = linea::data::read_idx(in.write(gz.data(), gz.size()));
    const size_t header = 4 + 4 * static_cast<size_t>(t.dim());
    linea::fuzz::require(header + static_cast<size_t>(t.numel()) == size, "read_idx reads exactly header + data");
    linea::fuzz::require(linea::fuzz::bytes_of(t) == std::string(reinterpret_cast<const char*>(data) + header,
                                                                 size - header),
                         "read_idx returns the data after the header");
  } catch (const linea::Error&) {
  }
  return 0;
}
