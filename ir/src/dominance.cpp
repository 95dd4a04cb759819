//===- dominance.cpp --------------------------------------------------------------------------===//
#include "cubecc/ir/dominance.h"

namespace cubecc::ir {

bool properly_dominates(const Operation *a, const Operation *b) {
  // Lift b to the op of a's region that encloses it (or b itself).
  const Region *region = a->parent_region();
  const Operation *b_in_region = b;
  while (b_in_region && b_in_region->parent_region() != region)
    b_in_region = b_in_region->parent_op();
  if (!b_in_region)
    return false;
  if (b_in_region == a)
    return b != a; // b is nested inside a's regions: a's results are not visible there, but a
                   // itself comes first
  for (const Operation *op = a->next(); op; op = op->next())
    if (op == b_in_region)
      return true;
  return false;
}

bool dominates(const Value *v, const Operation *user) {
  if (const Operation *def = v->defining_op())
    return def != user && properly_dominates(def, user) &&
           // A result is not visible inside its own op's regions.
           [&] {
             for (const Operation *p = user->parent_op(); p; p = p->parent_op())
               if (p == def)
                 return false;
             return true;
           }();
  for (const Region *r = user->parent_region(); r;
       r = r->parent_op() ? r->parent_op()->parent_region() : nullptr)
    if (r == v->owner_region())
      return true;
  return false;
}

} // namespace cubecc::ir
