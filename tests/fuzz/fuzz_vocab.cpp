// Vocab::load on arbitrary bytes. A vocabulary that loads must save and load back the same, and
// encode/decode its own bytes.
#include "data/text.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using linea::data::Vocab;
  static const linea::fuzz::InputFile in("vocab"), out("vocab_out");
  Vocab v;
  try {
    v = Vocab::load(in.write(data, size));
  } catch (const linea::Error&) {
    return 0;
  }
  v.save(out.path());
  linea::fuzz::require(Vocab::load(out.path()).bytes() == v.bytes(), "vocab round trip keeps the bytes");
  const std::string all(v.bytes().begin(), v.bytes().end());
  linea::fuzz::require(v.decode(v.encode(all)) == all, "a vocab encodes and decodes its own bytes");
  return 0;
}
