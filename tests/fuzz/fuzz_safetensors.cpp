// load_safetensors and load_checkpoint on arbitrary bytes. A file that loads must survive
// save_safetensors + load_safetensors unchanged; a checkpoint is loaded into a small fixed model.
#include "fuzz_input.h"
#include "fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace linea;
  static const fuzz::InputFile in("safetensors"), out("safetensors_out");
  const std::string& path = in.write(data, size);
  nn::Safetensors file;
  try {
    file = nn::load_safetensors(path);
  } catch (const Error&) {
    return 0;
  }
  fuzz::CheckpointModel model;
  try {
    nn::load_checkpoint(path, model.net, model.optimizer);
  } catch (const Error&) {
  }
  try {
    nn::save_safetensors(out.path(), file.tensors, file.metadata);
  } catch (const Error&) {
    return 0;  // a name the writer refuses (say ""), not a parser bug
  }
  const nn::Safetensors back = nn::load_safetensors(out.path());
  fuzz::require(back.metadata == file.metadata, "safetensors round trip keeps the metadata");
  fuzz::require(back.tensors.size() == file.tensors.size(), "safetensors round trip keeps every tensor");
  for (const auto& [name, t] : file.tensors) {
    const auto it = back.tensors.find(name);
    fuzz::require(it != back.tensors.end() && it->second.shape() == t.shape() && it->second.dtype() == t.dtype() &&
                      fuzz::bytes_of(it->second) == fuzz::bytes_of(t),
                  "safetensors round trip keeps each tensor's name, shape, dtype and bytes");
  }
  return 0;
}
