//===- verifier.h - Checks that a module is well formed --------------------------------------===//
//
// Checks types, operand and result counts, attributes, dominance (every use sees its definition
// in the same region or an enclosing one), region structure and terminators, access rights
// (no store to a read-only buffer, no load from a write-only one), and barrier placement (no
// barrier where the invocations of a workgroup may disagree on whether they reach it).
//
// Runs on every parsed module and, in test builds, after every pass. Each diagnostic names the op
// and its location: the op's own `loc` when it has one, else its position in the parsed text.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/parser.h"

#include <vector>

namespace cubecc::ir {

/// The most bytes a kernel's local arrays (local.alloc) may hold per invocation: 512 KiB, CUDA's
/// local memory per thread, the smallest limit of the targets; the verifier refuses more.
inline constexpr uint64_t kMaxLocalBytes = uint64_t(512) * 1024;

/// All problems found in `module` (empty when it is well formed).
std::vector<Diagnostic> verify(const Module &module, const SourceMap *source_map = nullptr);
/// The problems of one kernel (of its module).
std::vector<Diagnostic> verify(const Kernel &kernel, const SourceMap *source_map = nullptr);

} // namespace cubecc::ir
