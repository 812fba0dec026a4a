// CharCorpus::from_file on arbitrary bytes, with its own vocabulary and with a fixed one (which
// must refuse bytes it lacks). A corpus that loads gives batches whose targets are the inputs
// shifted by one.
#include "data/text.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace linea;
  static const fuzz::InputFile in("corpus");
  static const data::Vocab letters = data::Vocab::from_text("abcdefghijklmnopqrstuvwxyz \n");
  const std::string& path = in.write(data, size);
  try {
    data::CharCorpus::from_file(path, letters);
  } catch (const Error&) {
  }
  try {
    const data::CharCorpus c = data::CharCorpus::from_file(path);
    fuzz::require(c.size("train") + c.size("val") == static_cast<int64_t>(size), "the splits cover the corpus");
    if (c.size("train") > 4) {
      Generator gen(size);
      const data::TextBatch b = c.get_batch("train", 2, 4, gen);
      fuzz::require(b.x.narrow(1, 1, 3).to_vector() == b.y.narrow(1, 0, 3).to_vector(), "y is x shifted by one");
    }
  } catch (const Error&) {
  }
  return 0;
}
