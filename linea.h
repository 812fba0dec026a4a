// <linea/linea.h> — the whole public API in one include.
#pragma once

#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/device.h"
#include "linea/tensor/dtype.h"
#include "linea/tensor/error.h"
#include "linea/tensor/npy.h"
#include "linea/tensor/print.h"
#include "linea/tensor/random.h"
#include "linea/tensor/shape.h"
#include "linea/tensor/tensor.h"

#include "linea/autograd/function.h"
#include "linea/autograd/gradcheck.h"
#include "linea/autograd/graph.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_norm.h"
#include "linea/autograd/ops_reduce.h"

#include "linea/nn/attention.h"
#include "linea/nn/embedding.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/init.h"
#include "linea/nn/layers.h"
#include "linea/nn/norm.h"

#include "linea/cuda/runtime.h"
