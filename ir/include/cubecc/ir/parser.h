//===- parser.h - Text (.cir) to Module -------------------------------------------------------===//
//
// The parser accepts exactly what the printer writes (plus comments, free whitespace and a few
// conveniences documented in docs/ir.md). Input is untrusted: every malformed input yields a
// Diagnostic with the buffer name, line and column; nothing crashes or recurses without bound.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cubecc::ir {

/// A position in the text the module was parsed from.
struct TextPosition {
  uint32_t line = 0;
  uint32_t col = 0;
};

/// Where each op and kernel of a parsed module sits in the text, so that later diagnostics (the
/// verifier's) can point into the .cir file even for ops without a `loc(...)`.
struct SourceMap {
  std::string buffer_name;
  std::unordered_map<const Operation *, TextPosition> ops;
  std::unordered_map<const Kernel *, TextPosition> kernels;
};

struct ParseResult {
  std::unique_ptr<Module> module; ///< null when parsing failed
  std::vector<Diagnostic> errors;
  SourceMap source_map;
};

/// Regions nested deeper than this are refused (they would only come from broken or hostile
/// input, and the parser, printer and verifier recurse once per level).
inline constexpr unsigned kMaxRegionDepth = 128;

/// Parses one module. `buffer_name` names the text in diagnostics (a file name, or "<stdin>").
ParseResult parse_module(std::string_view text, std::string_view buffer_name);

} // namespace cubecc::ir
