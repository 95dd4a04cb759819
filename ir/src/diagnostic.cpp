//===- diagnostic.cpp -------------------------------------------------------------------------===//
#include "cubecc/ir/diagnostic.h"

#include <fmt/format.h>

namespace cubecc::ir {

std::string Diagnostic::str() const {
  std::string out;
  if (!file.empty())
    out += file + ":";
  if (line)
    out += fmt::format("{}:{}:", line, col);
  out += out.empty() ? "error: " : " error: ";
  out += message;
  for (const std::string &note : notes)
    out += "\n  note: " + note;
  return out;
}

std::string to_string(const std::vector<Diagnostic> &diagnostics) {
  std::string out;
  for (const Diagnostic &d : diagnostics)
    out += d.str() + "\n";
  return out;
}

} // namespace cubecc::ir
