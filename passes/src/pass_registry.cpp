//===- pass_registry.cpp - The list of passes and the -O pipelines ----------------------------===//
#include "cubecc/passes/pass_manager.h"

#include "cubecc/passes/legalize.h"
#include "cubecc/passes/passes.h"
#include "cubecc/passes/print_hash.h"

#include <sstream>

namespace cubecc::passes {

const std::vector<PassInfo> &registered_passes() {
  static const std::vector<PassInfo> passes = {
      {"bounds-check", "checked mode: guard memory accesses not proven in bounds", bounds_check},
      {"canonicalize", "fold constants and apply algebraic identities", canonicalize},
      {"cse", "merge identical pure ops", cse},
      {"dce", "remove unused ops and effect-free ifs and loops", dce},
      {"legalize", "pin unspecified results and expand math a target lacks (portable target)",
       static_cast<void (*)(ir::Module &, PassContext &)>(legalize)},
      {"licm", "hoist loop-invariant pure ops out of loops", licm},
      {"print-hash", "print each kernel's structural hash (changes nothing)", print_hash},
      {"promote-locals", "turn locals accessed at constant indices (DSL Vars) into SSA values",
       promote_locals},
      {"simplify-cf", "inline constant branches, drop empty ifs and loops that never run",
       simplify_cf},
      {"strength-reduce", "turn multiplications and divisions by powers of two into shifts",
       strength_reduce},
      {"unroll", "fully unroll small loops with constant trip counts, or by their factor", unroll},
      {"vectorize", "merge adjacent aligned scalar loads and stores into vector ones", vectorize},
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
  // Each pipeline reads as a list. Locals become SSA values first, so that every later pass
  // sees through a DSL Var. -O3 adds unrolling first (so that folding sees the induction
  // variable's values) and vectorization after CSE (so that equal bases are one value).
  switch (level) {
  case 0:
    return {};
  case 1:
    return {"promote-locals", "canonicalize", "dce"};
  case 2:
    return {"promote-locals",  "canonicalize", "simplify-cf", "cse", "licm",
            "strength-reduce", "canonicalize", "cse",         "dce"};
  default:
    return {"promote-locals",  "canonicalize", "simplify-cf", "unroll",
            "canonicalize",    "cse",          "licm",        "vectorize",
            "strength-reduce", "canonicalize", "cse",         "dce"};
  }
}

std::vector<ir::Diagnostic> optimize(ir::Module &module, int level) {
  PassManager manager;
  for (std::string_view name : optimization_pipeline(level))
    manager.add(*find_pass(name));
  std::ostringstream out, log;
  return manager.run(module, out, log);
}

} // namespace cubecc::passes
