//===- info.h - `cubecc --version` and `cubecc kernels`: what cubecc and a library contain ----===//
#pragma once

#include <string>

namespace cubecc::tools {

/// Prints cubecc's version, its formats' versions and the toolkits found at run time (NVRTC,
/// hipRTC, SPIRV-Tools, SPIRV-Cross); as one JSON object with `json`. Returns the exit code.
int version_command(bool json);

/// Lists the kernels a kernel library registers (name, configuration; with `hashes`, traced and
/// hashed); as a JSON array with `json`. Returns the exit code.
int kernels_command(const std::string &library, bool hashes, bool json);

} // namespace cubecc::tools
