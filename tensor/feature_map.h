// MHLA's feature map φ, applied to queries and keys (nn/functional/attention.h). A header of its
// own, free of fmt and of the kernel interface, because the public attention API names it and the
// op table (ops.h), Backend::MHLAArgs and the CUDA kernels (cuda/mhla.cu) name the same four maps.
#pragma once

namespace linea {

enum class FeatureMap {
  ReluEps,   // relu(x) + eps  (the vision default)
  Elu1,      // elu(x) + 1
  Relu,      // relu(x)        (the official causal LM's choice)
  Identity,  // x: the caller applied its own feature map (e.g. φ then RoPE)
};

}  // namespace linea
