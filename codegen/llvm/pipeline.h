//===- pipeline.h - LLVM module to optimized code and a linked shared object -----------------===//
#pragma once

#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <string>

namespace cubecc::llvm_backend {

/// A target machine for a CPU level ("x86-64-v3"): PIC, aggressive codegen, no fp contraction
/// other than the IR's own fma. Empty with `error` set when the target is unavailable.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string &level,
                                                         std::string &error);
/// LLVM's O3 pipeline (new pass manager).
void optimize(llvm::Module &module, llvm::TargetMachine &machine);
/// Object file or assembly text of the module.
bool emit_code(llvm::Module &module, llvm::TargetMachine &machine, bool assembly, std::string &out,
               std::string &error);
/// Links an object into a shared object against libc, libm and libmvec with lld (in process;
/// links are serialized, lld is not thread-safe).
bool link_shared_object(const std::string &object, std::string &out, std::string &error);

} // namespace cubecc::llvm_backend
