//===- pass_registry.cpp - The list of passes and the -O pipelines ----------------------------===//
#include "cubecc/passes/pass_manager.h"
#include "cubecc/passes/print_hash.h"

namespace cubecc::passes {

const std::vector<PassInfo> &registered_passes() {
  static const std::vector<PassInfo> passes = {
      {"print-hash", "print each kernel's structural hash (changes nothing)", print_hash},
  };
  return passes;
}

const PassInfo *find_pass(std::string_view name) {
  for (const PassInfo &p : registered_passes())
    if (p.name == name)
      return &p;
  return nullptr;
}

std::vector<std::string_view> optimization_pipeline(int level) {
  // No optimizing pass exists yet (they come with the passes issue), so every level is the empty
  // pipeline: -O2 is accepted and means "no rewriting" until then.
  (void)level;
  return {};
}

} // namespace cubecc::passes
