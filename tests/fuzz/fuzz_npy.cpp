// load_npy on arbitrary bytes. A file that loads must survive save_npy + load_npy unchanged.
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const linea::fuzz::InputFile in("npy"), out("npy_out");
  linea::Tensor t;
  try {
    t = linea::load_npy(in.write(data, size));
  } catch (const linea::Error&) {
    return 0;
  }
  try {
    linea::save_npy(out.path(), t);
  } catch (const linea::Error&) {
    return 0;  // the writer's own limit (a header past 64 KiB: .npy 1.0), not a parser bug
  }
  const linea::Tensor back = linea::load_npy(out.path());
  linea::fuzz::require(back.shape() == t.shape() && back.dtype() == t.dtype(), "npy round trip keeps shape and dtype");
  linea::fuzz::require(linea::fuzz::bytes_of(back) == linea::fuzz::bytes_of(t), "npy round trip keeps the bytes");
  return 0;
}
