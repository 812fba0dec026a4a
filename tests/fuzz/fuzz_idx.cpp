// read_idx on arbitrary bytes: raw IDX files, and gzip streams (zlib passes plain files through,
// so the gzip seeds make this harness fuzz gzip framing too). A file that loads has exactly its
// header's dims and data.
#include "data/idx.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const linea::fuzz::InputFile in("idx");
  try {
    const linea::Tensor t = linea::data::read_idx(in.write(data, size));
    linea::fuzz::require(t.dtype() == linea::DType::UInt8, "read_idx gives uint8");
  } catch (const linea::Error&) {
  }
  return 0;
}
