//===- passes_fuzzer.cpp - libFuzzer target for the optimization passes on hostile IR ---------===//
//
// `cubecc compile` and `cubecc-opt` run the passes on any module the verifier accepts, so a .cir
// file that parses and verifies is untrusted input to every pass. For each such input: the -O3
// pipeline, then `legalize` (the portable target: every expansion), `bounds-check` and a last
// `canonicalize` and `dce`, each pass followed by the verifier. A pass may refuse a kernel with a
// diagnostic; it must not crash, hang, leak or leave a module the verifier rejects. After
// `legalize` every op must meet the legal-IR contract (passes::is_legal), and the final module
// must print to text that parses and verifies again.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/legalize.h"
#include "cubecc/passes/pass_manager.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace cubecc;

namespace {

[[noreturn]] void finding(const std::string &what, std::string_view input, const ir::Module &m) {
  std::fprintf(stderr, "%s\n--- input\n%.*s\n--- module now\n%s", what.c_str(),
               static_cast<int>(input.size()), input.data(), ir::to_string(m).c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  ir::ParseResult parsed = ir::parse_module(text, "fuzz.cir");
  if (!parsed.module || !ir::verify(*parsed.module, &parsed.source_map).empty())
    return 0; // the parser and verifier are parse_fuzzer's
  ir::Module &module = *parsed.module;

  std::vector<std::string_view> pipeline = passes::optimization_pipeline(3);
  for (std::string_view name : {"legalize", "bounds-check", "canonicalize", "dce"})
    pipeline.push_back(name);
  for (std::string_view name : pipeline) {
    const passes::PassInfo *pass = passes::find_pass(name);
    if (!pass)
      finding("no registered pass '" + std::string(name) + "'", text, module);
    std::ostringstream out;
    passes::PassContext context{out, {}, {}};
    pass->run(module, context);
    if (!context.errors.empty())
      return 0; // refused, with a diagnostic
    if (std::vector<ir::Diagnostic> problems = ir::verify(module); !problems.empty())
      finding("the module was valid before pass '" + std::string(name) + "' and not after it:\n" +
                  ir::to_string(problems),
              text, module);
    if (name == "legalize")
      for (const auto &kernel : module.kernels())
        std::as_const(*kernel).walk([&](const ir::Operation *op) {
          if (!passes::is_legal(*op))
            finding("'" + std::string(op->name()) + "' is not legal after legalize", text, module);
        });
  }

  std::string printed = ir::to_string(module);
  ir::ParseResult again = ir::parse_module(printed, "optimized.cir");
  if (!again.module)
    finding("the optimized module's text does not parse:\n" + ir::to_string(again.errors), text,
            module);
  if (std::vector<ir::Diagnostic> problems = ir::verify(*again.module, &again.source_map);
      !problems.empty())
    finding("the optimized module's text does not verify:\n" + ir::to_string(problems), text,
            module);
  return 0;
}
