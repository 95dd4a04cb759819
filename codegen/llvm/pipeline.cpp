//===- pipeline.cpp - Target machine, O3, code emission and the in-process lld link ----------===//
#include "llvm/pipeline.h"

#include <lld/Common/Driver.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Triple.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>

LLD_HAS_DRIVER(elf)

namespace cubecc::llvm_backend {

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string &level,
                                                         std::string &error) {
  static std::once_flag init;
  std::call_once(init, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
  });
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string why;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple.str(), why);
  if (!target) {
    error = "LLVM has no x86-64 target: " + why;
    return nullptr;
  }
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Strict; // only the IR's own fma fuses
  options.UnsafeFPMath = false;
  options.NoInfsFPMath = false;
  options.NoNaNsFPMath = false;
  options.NoSignedZerosFPMath = false;
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple.str(), level, "", options, llvm::Reloc::PIC_,
                                  llvm::CodeModel::Small, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    error = "LLVM cannot make a target machine for " + level;
  return machine;
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(&machine, tuning);
  llvm::TargetLibraryInfoImpl library(llvm::Triple(module.getTargetTriple()));
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library); });
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes =
      builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  passes.run(module, mam);
}

bool emit_code(llvm::Module &module, llvm::TargetMachine &machine, bool assembly, std::string &out,
               std::string &error) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, stream, nullptr,
                                  assembly ? llvm::CodeGenFileType::AssemblyFile
                                           : llvm::CodeGenFileType::ObjectFile)) {
    error = "LLVM cannot emit code for this target";
    return false;
  }
  passes.run(module);
  out.assign(buffer.data(), buffer.size());
  return true;
}

namespace {

bool write_file(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

} // namespace

bool link_shared_object(const std::string &object, std::string &out, std::string &error) {
  const char *tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/cubecc-link-XXXXXX";
  std::vector<char> dir_name(dir_template.begin(), dir_template.end());
  dir_name.push_back('\0');
  if (!mkdtemp(dir_name.data())) {
    error = "cannot make a temporary directory from " + dir_template;
    return false;
  }
  std::string dir = dir_name.data();
  std::string in = dir + "/kernel.o", so = dir + "/kernel.so";
  bool ok = write_file(in, object);
  if (!ok)
    error = "cannot write " + in;
  if (ok) {
    static std::mutex lld_mutex; // lld 19 keeps global state: one link at a time
    std::lock_guard<std::mutex> lock(lld_mutex);
    std::vector<const char *> args = {"ld.lld",       "-shared",  "--as-needed", "-z",
                                      "noexecstack",  "-z",       "now",         "--hash-style=gnu",
                                      "-o",           so.c_str(), in.c_str(),    CUBECC_LIBM,
                                      CUBECC_LIBMVEC, CUBECC_LIBC};
    std::string messages;
    llvm::raw_string_ostream diag(messages), std_out(messages);
    lld::Result result = lld::lldMain(args, std_out, diag, {{lld::Gnu, &lld::elf::link}});
    if (result.retCode != 0) {
      ok = false;
      error = "lld failed to link the kernel: " + messages;
    }
  }
  if (ok) {
    std::ifstream f(so, std::ios::binary);
    std::ostringstream bytes;
    bytes << f.rdbuf();
    out = bytes.str();
    if (out.empty()) {
      ok = false;
      error = "lld wrote no shared object";
    }
  }
  std::remove(in.c_str());
  std::remove(so.c_str());
  rmdir(dir.c_str());
  return ok;
}

} // namespace cubecc::llvm_backend
