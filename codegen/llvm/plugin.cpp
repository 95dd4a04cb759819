//===- plugin.cpp - The extern "C" entry points of libcubecc_llvm.so (plugin_abi.h) ----------===//
#include "llvm/plugin_abi.h"

#include "cubecc/ir/parser.h"
#include "cubecc/ir/verifier.h"
#include "llvm/lower.h"
#include "llvm/pipeline.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <exception>
#include <string_view>

using namespace cubecc;

namespace {

int compile(const cubecc_llvm_request &request, cubecc_llvm_output_fn output,
            cubecc_llvm_diagnostic_fn diagnostic, void *user) {
  auto fail = [&](const std::string &message) {
    diagnostic(user, "", 0, 0, message.c_str());
    return 1;
  };
  ir::ParseResult parsed =
      ir::parse_module(std::string_view(request.ir_text, request.ir_size), "<cpu kernel>");
  if (!parsed.module) {
    for (const ir::Diagnostic &d : parsed.errors)
      diagnostic(user, d.file.c_str(), d.line, d.col, d.message.c_str());
    return parsed.errors.empty() ? fail("the kernel's IR text does not parse") : 1;
  }
  ir::Kernel *kernel = parsed.module->find_kernel(request.kernel_name ? request.kernel_name : "");
  if (!kernel)
    return fail(fmt::format("no kernel @{} in the IR text", request.kernel_name));
  std::vector<ir::Diagnostic> problems = ir::verify(*parsed.module, &parsed.source_map);
  if (!problems.empty()) {
    for (const ir::Diagnostic &d : problems)
      diagnostic(user, d.file.c_str(), d.line, d.col, d.message.c_str());
    return 1;
  }
  std::string level = request.level ? request.level : "";
  unsigned width = level == "x86-64-v4" ? 16 : level == "x86-64-v3" ? 8 : 4;
  std::string error;
  auto machine = llvm_backend::make_target_machine(level, error);
  if (!machine)
    return fail(error);
  llvm::LLVMContext context; // one per compile: compiles run in parallel
  llvm_backend::LowerOptions options;
  options.width = width;
  options.checked = request.checked != 0;
  options.level = level;
  std::vector<ir::Diagnostic> errors;
  std::unique_ptr<llvm::Module> module =
      llvm_backend::lower_kernel(*kernel, context, *machine, options, errors);
  if (!module) {
    for (const ir::Diagnostic &d : errors)
      diagnostic(user, d.file.c_str(), d.line, d.col, d.message.c_str());
    if (errors.empty()) {
      fail("lowering to LLVM failed (a bug in cubecc)");
      return CUBECC_LLVM_INTERNAL_FAILURE;
    }
    return 1;
  }
  std::string broken;
  llvm::raw_string_ostream broken_stream(broken);
  if (llvm::verifyModule(*module, &broken_stream)) {
    fail("internal error: the LLVM IR made for kernel @" + kernel->name() +
         " does not verify (a bug in cubecc): " + broken);
    return CUBECC_LLVM_INTERNAL_FAILURE;
  }
  llvm_backend::optimize(*module, *machine);
  std::string out;
  if (request.emit == CUBECC_LLVM_EMIT_LLVM_IR) {
    llvm::raw_string_ostream text(out);
    module->print(text, nullptr);
  } else if (!llvm_backend::emit_code(*module, *machine, request.emit == CUBECC_LLVM_EMIT_ASSEMBLY,
                                      out, error)) {
    return fail(error);
  } else if (request.emit == CUBECC_LLVM_EMIT_SHARED_OBJECT) {
    std::string object = std::move(out);
    if (!llvm_backend::link_shared_object(object, out, error))
      return fail(error);
  }
  output(user, out.data(), out.size());
  return 0;
}

} // namespace

extern "C" {

uint32_t cubecc_llvm_plugin_abi_version(void) {
  return CUBECC_LLVM_PLUGIN_ABI_VERSION;
}

const char *cubecc_llvm_version(void) {
  return "LLVM " LLVM_VERSION_STRING;
}

int cubecc_llvm_compile(const cubecc_llvm_request *request, cubecc_llvm_output_fn output,
                        cubecc_llvm_diagnostic_fn diagnostic, void *user) {
  try {
    return compile(*request, output, diagnostic, user);
  } catch (const std::exception &e) {
    diagnostic(user, "", 0, 0,
               (std::string("internal error in the LLVM plugin: ") + e.what()).c_str());
    return CUBECC_LLVM_INTERNAL_FAILURE;
  }
}
}
