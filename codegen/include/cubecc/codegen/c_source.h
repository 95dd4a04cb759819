//===- c_source.h - What the C-family emitter writes (shared by the CUDA and HIP backends) ----===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"

#include <string>

namespace cubecc::codegen {

/// The C++ a C-family backend wrote for one kernel.
struct CSource {
  std::string text;  ///< the whole translation unit
  std::string entry; ///< the extern "C" kernel name
  KernelAbi abi;
};

} // namespace cubecc::codegen
