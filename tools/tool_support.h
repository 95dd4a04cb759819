//===- tool_support.h - What cubecc and cubecc-opt share: exit codes, output, error reporting -===//
#pragma once

#include "cubecc/ir/diagnostic.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace cubecc::tools {

/// The command-line contract's exit codes.
enum ExitCode { kSuccess = 0, kUserError = 1, kUsageError = 2, kInternalError = 3 };

/// Prints the diagnostics to standard error; returns kUserError.
inline int report(const std::vector<ir::Diagnostic> &diagnostics) {
  std::cerr << ir::to_string(diagnostics);
  return kUserError;
}

/// Writes `text` to `output` ("-" for standard output), reporting a failure as `tool`'s error.
inline int write_output(const char *tool, const std::string &output, const std::string &text) {
  if (output == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) {
      std::cerr << tool << ": error: writing to standard output failed\n";
      return kUserError;
    }
    return kSuccess;
  }
  std::ofstream file(output, std::ios::binary);
  file << text;
  if (!file) {
    std::cerr << fmt::format("{}: error: cannot write the file: {}\n", output,
                             std::strerror(errno));
    return kUserError;
  }
  return kSuccess;
}

/// Runs a tool's body; an escaping exception is a bug in cubecc and exits with kInternalError.
template <class F> int run_tool(const char *tool, F &&body) {
  try {
    return body();
  } catch (const std::exception &e) {
    std::cerr << tool << ": internal error: " << e.what()
              << "\nThis is a bug in cubecc; please report it with the input that caused it.\n";
    return kInternalError;
  }
}

} // namespace cubecc::tools
