//===- reduce.cpp - Sum or maximum of a 1-D tensor, one partial result per workgroup ----------===//
//
// out[w] = op(in[j] for the j that workgroup w visits), with op = sum or max chosen at comptime.
//
// Output: one partial result per workgroup (no atomics), so the result is deterministic and the
// max works on floats (atomic.max takes integers only). Launch with G workgroups and an `out` of
// G elements; reduce the G partials by launching the same kernel again on `out` with one
// workgroup (any G works: every invocation loops over the tensor with a grid stride).
//
// Per workgroup: each invocation folds its grid-strided elements into a register, each subgroup
// combines its invocations with a subgroup reduction, lane 0 of every subgroup writes that partial
// to shared memory, and after a barrier the first subgroup folds the partials and writes out[w].
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

#include <limits>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

enum class ReduceOp { Sum, Max };

namespace {

/// The identity of the reduction (what an invocation without elements contributes).
template <ReduceOp Op> constexpr float identity() {
  return Op == ReduceOp::Sum ? 0.0f : -std::numeric_limits<float>::infinity();
}

template <ReduceOp Op, class A, class B> auto combine(const A &a, const B &b) {
  if constexpr (Op == ReduceOp::Sum)
    return a + b;
  else
    return dsl::max(a, b);
}

/// The reduction over the subgroup, located at the caller's line.
template <ReduceOp Op, class X>
dsl::Val<float> subgroup_reduce(const X &x, const dsl::Loc &loc = dsl::Loc::current()) {
  if constexpr (Op == ReduceOp::Sum)
    return dsl::subgroup_sum(x, loc);
  else
    return dsl::subgroup_max(x, loc);
}

} // namespace

/// `kWorkgroup` invocations per workgroup (a 1-D workgroup).
template <ReduceOp Op, int kWorkgroup>
void reduce(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  // One slot per subgroup; as many slots as invocations covers a subgroup size of 1.
  dsl::Shared<float, kWorkgroup> partials;

  dsl::Val<uint32_t> n = in.size();
  dsl::Val<uint32_t> lane = dsl::subgroup_lane();
  dsl::Val<uint32_t> subgroup = dsl::subgroup_id();
  dsl::Val<uint32_t> stride = dsl::num_workgroups().x * kWorkgroup;

  // 1. Grid-strided loop: each invocation folds its elements in a register.
  dsl::Var<float> acc = identity<Op>();
  dsl::for_(dsl::global_id().x, n, stride,
            [&](dsl::Val<uint32_t> i) { acc = combine<Op>(acc, in(i)); });

  // 2. Within each subgroup (reached by every invocation, so all lanes take part).
  dsl::Val<float> mine = subgroup_reduce<Op>(acc);
  dsl::if_(lane == 0u, [&] { partials[subgroup] = mine; });
  dsl::barrier();

  // 3. The first subgroup folds the per-subgroup partials. It strides by the subgroup size, so
  // it also covers more subgroups than one subgroup has lanes (small subgroup sizes).
  dsl::if_(subgroup == 0u, [&] {
    dsl::Var<float> total = identity<Op>();
    dsl::for_(lane, dsl::num_subgroups(), dsl::subgroup_size(),
              [&](dsl::Val<uint32_t> s) { total = combine<Op>(total, partials[s]); });
    dsl::Val<float> result = subgroup_reduce<Op>(total);
    dsl::if_(lane == 0u, [&] { out(dsl::workgroup_id().x) = result; });
  });
}

static const bool registered_reduce =
    dsl::register_kernel<reduce<ReduceOp::Sum, 256>>(
        "reduce_sum", "op=sum,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}}) &&
    dsl::register_kernel<reduce<ReduceOp::Max, 256>>(
        "reduce_max", "op=max,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void reduce<ReduceOp::Sum, 256>(dsl::Tensor<const float>, dsl::Tensor<float>);
template void reduce<ReduceOp::Max, 256>(dsl::Tensor<const float>, dsl::Tensor<float>);

} // namespace cubecc::examples
