// A training run's checkpoint, as the models' Trainers write it: model + optimizer
// (nn::save_checkpoint) with the step count under "step" in the metadata, so a resumed run
// continues at the step where it stopped. A checkpoint never holds a NaN or an infinity.
#pragma once
#include <cstdint>
#include <string>

#include "linea/nn/checkpoint.h"
#include "linea/nn/module.h"
#include "linea/nn/optim.h"

namespace linea::models {

// A text entry of a checkpoint's metadata; a missing one is an error naming the file and the key.
// `program` names the caller in the errors ("[program] ...").
std::string meta_text(const nn::Metadata& meta, const std::string& key, const std::string& path,
                      const std::string& program);
// A number stored in a checkpoint's metadata (text). A missing, non-numeric or non-finite entry is
// an error naming the file and the key, not a std::stod exception that aborts the program.
double meta_number(const nn::Metadata& meta, const std::string& key, const std::string& path,
                   const std::string& program);
// The same for a count: a non-negative integer.
int64_t meta_integer(const nn::Metadata& meta, const std::string& key, const std::string& path,
                     const std::string& program);

// Refuses (linea::Error) to save a model or optimizer holding a non-finite value: a diverged run's
// weights are worth nothing, and written they would replace the last good checkpoint at `path`.
// The error names meta["program"] when there is one.
void save_run(const std::string& path, const nn::Module& model, const nn::Optimizer& optimizer, int64_t step,
              nn::Metadata meta);
// Loads into model and optimizer, sets `step`, returns the metadata. A file without a step count
// is an error naming its "program" entry, or `fallback` when it has none.
nn::Metadata load_run(const std::string& path, nn::Module& model, nn::Optimizer& optimizer, int64_t& step,
                      const std::string& fallback);

}  // namespace linea::models
