//===- passes.h - Every pass, one function each (one .cpp per pass under passes/src) ---------===//
//
// A pass takes the module and a PassContext (its report stream and statistics) and leaves the
// module valid. Each is registered under its CLI name in pass_registry.cpp.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `canonicalize`: folds constant expressions (exactly as the interpreter computes them) and
/// applies the algebraic identities of a pattern table (x + 0, x * 1, select on a constant, ...);
/// puts constants on the right of commutative ops.
void canonicalize(ir::Module &module, PassContext &context);
/// `cse`: merges identical pure ops where the first dominates the second.
void cse(ir::Module &module, PassContext &context);
/// `dce`: removes unused pure ops, and ifs and loops whose results are unused and whose bodies
/// have no effect.
void dce(ir::Module &module, PassContext &context);
/// `licm`: hoists pure ops whose operands are all defined outside a loop to just before it.
void licm(ir::Module &module, PassContext &context);
/// `simplify-cf`: inlines the taken branch of an if on a constant, removes empty ifs and loops
/// that run zero times.
void simplify_cf(ir::Module &module, PassContext &context);
/// `strength-reduce`: integer multiplication, unsigned division and remainder by powers of two
/// become shifts and masks.
void strength_reduce(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
