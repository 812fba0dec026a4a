// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), so that
// Python's `safetensors` reads linea's files and linea reads theirs:
//
//   [u64 little-endian N][N bytes of JSON header][data]
//   header: {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"<key>": "<string value>"}}
//   data: raw little-endian tensors, C order; offsets are relative to the start of the data.
//
// Supported dtypes: F32, F64, I64, U8, BOOL. Writes are atomic (write_file_atomically: a temp file
// beside the target, fsync, rename over it): a crash mid-save leaves the previous file intact. Loading
// checks everything before trusting it, so a truncated, corrupted or hostile file is a
// linea::Error naming the file and the problem, never a crash or an out-of-bounds read.
#pragma once
#include <map>
#include <string>

#include "linea/nn/module.h"
#include "linea/nn/optim.h"

namespace linea::nn {

using Metadata = std::map<std::string, std::string>;

struct Safetensors {
  StateDict tensors;  // contiguous CPU tensors
  Metadata metadata;
};

// Tensors may be any strides and any device (they are gathered to the host first).
void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});
Safetensors load_safetensors(const std::string& path);

// A training checkpoint: the model's state under "model.<name>", the optimizer's under
// "optim.<key>" (step counts, moments, group lrs), and `metadata` (say the data loader's
// position) in the header, so a run resumes bit for bit.
void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const Metadata& metadata = {});
// Loads into an existing model and optimizer of the same structure (strict: every key must
// match by name, shape and dtype) and returns the metadata. The model is loaded first; each of
// the two is checked completely before it is changed.
Metadata load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer);

}  // namespace linea::nn
