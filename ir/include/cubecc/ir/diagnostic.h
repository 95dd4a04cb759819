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
  /// Whether this is cubecc's own bug (a toolkit rejected code cubecc wrote, generated code that
  /// does not validate) rather than a refusal of the user's input: the tools exit with their
  /// internal-error code for it. Set where the failure is found, never inferred from the text.
  bool internal = false;

  /// "file:line:col: error: message" followed by one "note: ..." line per note.
  std::string str() const;
};

std::string to_string(const std::vector<Diagnostic> &diagnostics);

} // namespace cubecc::ir
