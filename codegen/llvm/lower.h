//===- lower.h - cubecc IR to LLVM IR: SPMD on SIMD ------------------------------------------===//
//
// One invocation per vector lane: a workgroup runs as gangs of `width` lanes (a gang is a
// subgroup), divergent control flow under masks, barriers by splitting the kernel into segments
// that each loop over the gangs. docs/cpu.md describes the scheme.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <string>
#include <vector>

namespace cubecc::llvm_backend {

struct LowerOptions {
  unsigned width = 8;   ///< lanes per gang (= subgroup size): 4, 8 or 16
  bool checked = false; ///< bounds-check buffer, shared and local array accesses (cpu_abi.h)
  std::string level;    ///< the CPU level, for the vector math library's variant
};

/// The kernel as an LLVM module exporting the cpu_abi.h symbols; null with `errors` on failure.
std::unique_ptr<llvm::Module> lower_kernel(const ir::Kernel &kernel, llvm::LLVMContext &context,
                                           llvm::TargetMachine &machine,
                                           const LowerOptions &options,
                                           std::vector<ir::Diagnostic> &errors);

} // namespace cubecc::llvm_backend
