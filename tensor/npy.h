// NumPy .npy files: the simplest way to move tensors to and from Python (np.save / np.load).
// Format 1.0 (2.0/3.0 are read too), little-endian, C order. Supported dtypes: float32 ('<f4'),
// float64 ('<f8'), int64 ('<i8'), bool ('|b1'), uint8 ('|u1'). Anything else, a Fortran-order
// array, or a truncated/corrupted file is a linea::Error naming the file.
#pragma once
#include <string>

#include "linea/tensor/tensor.h"

namespace linea {

// Writes t (any strides, any device) as a C-order array; non-contiguous tensors are gathered.
void save_npy(const std::string& path, const Tensor& t);
// Reads a .npy file into a new contiguous CPU tensor.
Tensor load_npy(const std::string& path);

}  // namespace linea
