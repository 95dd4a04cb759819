//===- passes.h - Every pass (one header and one .cpp per pass) -------------------------------===//
//
// A pass takes the module and a PassContext (its report stream and statistics) and leaves the
// module valid. Each is registered under its CLI name in pass_registry.cpp.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/passes/bounds_check.h"
#include "cubecc/passes/canonicalize.h"
#include "cubecc/passes/cse.h"
#include "cubecc/passes/dce.h"
#include "cubecc/passes/licm.h"
#include "cubecc/passes/print_hash.h"
#include "cubecc/passes/promote_locals.h"
#include "cubecc/passes/simplify_cf.h"
#include "cubecc/passes/strength_reduce.h"
#include "cubecc/passes/unroll.h"
#include "cubecc/passes/vectorize.h"
