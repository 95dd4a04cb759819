//===- cubecc-opt.cpp - IR in, passes, IR out -------------------------------------------------===//
//
// The driver of the lit tests: reads a .cir file (or stdin), verifies it, runs a pipeline, prints
// the result. Exit codes follow the command-line contract: 0 success, 1 user error (bad input,
// verification failure, an unwritable output), 2 usage error, 3 internal error (a bug in cubecc).
// The input is a regular file or standard input, of at most 256 MiB of text; the output is
// written as every tool writes (tool_support.h).
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include "tool_support.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <sstream>

namespace {

using namespace cubecc::tools;

int run(int argc, char **argv) {
  std::string input;
  std::string output = "-";
  std::string pipeline;
  int opt_level = -1;
  bool no_locations = false;
  cubecc::passes::PassManagerOptions options;

  std::string pass_list;
  for (const auto &p : cubecc::passes::registered_passes())
    pass_list += fmt::format("\n  {:<16} {}", p.name, p.description);

  CLI::App app{"cubecc-opt: read cubecc IR (.cir), verify it, run passes, print it"};
  app.footer("Passes:" + pass_list +
             "\n\nExamples:\n  cubecc-opt examples/ir/axpy.cir\n  cubecc-opt examples/ir/axpy.cir "
             "--passes=print-hash"
             "\n  cubecc-opt - -O2 < examples/ir/reduce_sum.cir\n\nExit codes: 0 success, 1 bad "
             "input, 2 usage, "
             "3 internal error.");
  app.add_option("input", input, "IR file to read, or - for standard input")->required();
  app.add_option("-o", output, "where to write the IR (default: standard output)");
  app.add_option("--passes", pipeline, "comma-separated passes to run, in order");
  app.add_option("-O", opt_level, "optimization level: the pass pipeline of -O0 .. -O3")
      ->check(CLI::Range(0, 3));
  app.add_flag("--verify-each,!--no-verify-each", options.verify_each,
               "verify the module after every pass (default on in debug builds)");
  app.add_flag("--print-after-all", options.print_after_all, "print the IR after every pass");
  app.add_option("--print-after", options.print_after, "print the IR after the named pass")
      ->delimiter(',');
  app.add_flag("--time-passes", options.time_passes, "report the time each pass takes");
  app.add_flag("--pass-statistics", options.statistics, "report what each pass changed");
  app.add_flag("--strip-locations", no_locations, "print without loc(...) annotations");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kUsageError;
  }
  if (opt_level >= 0 && !pipeline.empty()) {
    std::cerr << "cubecc-opt: error: give either --passes or -O<n>, not both\n";
    return kUsageError;
  }

  cubecc::passes::PassManager manager(options);
  if (opt_level >= 0) {
    for (std::string_view name : cubecc::passes::optimization_pipeline(opt_level))
      manager.add(*cubecc::passes::find_pass(name));
  } else if (auto error = manager.add_pipeline(pipeline)) {
    std::cerr << "cubecc-opt: error: " << shown_message(*error) << "\n";
    return kUsageError;
  }
  for (const std::string &name : options.print_after)
    if (!cubecc::passes::find_pass(name)) {
      std::cerr << "cubecc-opt: error: --print-after names unknown pass '" << shown(name) << "'\n";
      return kUsageError;
    }

  if (int code = check_output(output))
    return code;
  std::string text;
  std::string buffer_name = input == "-" ? "<stdin>" : input;
  if (std::string error; !read_ir_text(input, text, error)) {
    std::cerr << fmt::format("{}: error: {}\n", shown(buffer_name), error);
    return kUserError;
  }

  cubecc::ir::ParseResult parsed = cubecc::ir::parse_module(text, buffer_name);
  if (!parsed.module)
    return report(parsed.errors);
  if (auto problems = cubecc::ir::verify(*parsed.module, &parsed.source_map); !problems.empty())
    return report(problems);

  std::ostringstream pass_output;
  if (auto errors = manager.run(*parsed.module, pass_output, std::cerr); !errors.empty()) {
    if (int code = write_output("cubecc-opt", "-", pass_output.str()))
      return code;
    return report(errors);
  }

  std::string result =
      pass_output.str() + cubecc::ir::to_string(*parsed.module, {.locations = !no_locations});
  return write_output("cubecc-opt", output, result);
}

} // namespace

int main(int argc, char **argv) {
  return run_tool("cubecc-opt", [&] { return run(argc, argv); });
}
