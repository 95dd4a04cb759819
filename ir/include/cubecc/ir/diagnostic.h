//===- diagnostic.h - Located error messages --------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cubecc::ir {

/// One error: where (file:line:col, any part may be missing), what, and notes that help.
struct Diagnostic {
  std::string file;
  uint32_t line = 0;
  uint32_t col = 0;
  std::string message;
  std::vector<std::string> notes;

  /// "file:line:col: error: message" followed by one "note: ..." line per note.
  std::string str() const;
};

std::string to_string(const std::vector<Diagnostic> &diagnostics);

} // namespace cubecc::ir
