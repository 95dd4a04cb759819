//===- reduce.cpp - Sum or maximum of a 1-D tensor, one partial result per workgroup ----------===//
//
// out[w] = op(in[j] for the j that workgroup w visits), with op = sum or max chosen at comptime.
//
// Output: one partial result per workgroup (no atomics), so the result is deterministic and the
// max works on floats (atomic.max takes integers only). Launch with G workgroups and an `out` of
// G elements; reduce the G partials by launching the same kernel again on `out` with one
// workgroup (any G works: every invocation loops over the tensor with a grid stride).
//
// Per workgroup: each invocation folds its grid-strided elements into a register, and the
// workgroup combines the registers with dsl::WorkgroupOps::reduce (subgroup reductions, one
// partial per subgroup in shared memory, one barrier).
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

#include <type_traits>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

enum class ReduceOp { Sum, Max };

/// `kWorkgroup` invocations per workgroup (a 1-D workgroup).
template <ReduceOp Op, int kWorkgroup>
void reduce(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  using Combine = std::conditional_t<Op == ReduceOp::Sum, dsl::Plus, dsl::Maximum>;
  Combine op;
  dsl::WorkgroupOps<float, kWorkgroup> wg;

  // Each invocation folds its elements in a register (the identity where it has none).
  dsl::Var<float> acc = Combine::template identity<float>();
  dsl::grid_stride_for(in.size(), [&](dsl::Val<uint32_t> i) { acc = op(acc, in(i)); });

  dsl::Val<float> total = wg.reduce(acc, op);
  dsl::if_(dsl::local_index() == 0u, [&] { out(dsl::workgroup_id().x) = total; });
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
