//===- tune.h - `cubecc tune`: tuning a kernel library's tunables into a bundle ---------------===//
#pragma once

#include "env.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cubecc::tools {

struct TuneCommandOptions {
  std::vector<std::string> inputs; ///< kernel libraries (.so) or DSL sources (.cpp)
  std::string device;              ///< "" : CUBECC_DEVICE or the best present
  std::string output;              ///< the bundle to write
  std::string tunable;             ///< only this tunable, when set
  uint32_t samples = 10;
  uint32_t warmup = 2;
  ProvenanceOptions provenance;
};

/// Returns the process exit code (tool_support.h).
int tune_command(const TuneCommandOptions &options);

} // namespace cubecc::tools
