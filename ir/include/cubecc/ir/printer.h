//===- printer.h - The text form of cubecc IR (.cir) ------------------------------------------===//
//
// The printed form parses back to the same module, and printing that module gives the same text
// (see docs/ir.md for the grammar). Values print with their name hints, made unique among the
// names visible at that point (sibling regions may reuse a name); values without a hint are
// numbered in definition order across the kernel.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <string>
#include <string_view>

namespace cubecc::ir {

struct PrintOptions {
  bool locations = true; ///< print `loc("file":line:col)` after each op that has one
};

std::string to_string(const Module &module, PrintOptions options = {});
/// One kernel, as it would appear inside its module.
std::string to_string(const Kernel &kernel, PrintOptions options = {});

/// The literal of a `const` op of scalar type `t` whose value bits are `bits`.
std::string format_constant(Type t, int64_t bits);
/// A double-quoted string literal: printable ASCII as is, `"` and `\` escaped, other bytes as \XX.
std::string quote_string(std::string_view s);
/// `@name` when the name is an identifier, else `@"..."`.
std::string format_symbol(std::string_view name);

} // namespace cubecc::ir
