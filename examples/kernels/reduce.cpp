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
// reduce_sum_w4 reads kWidth = 4 elements per load (128 bits) when the tensor is contiguous:
// invocation g folds the groups of 4 elements g, g + G x 256, ... into four lanes, which it adds
// at the end, and invocation g < n % 4 of workgroup 0 also folds element 4 (n / 4) + g; a strided
// tensor takes the one-element loop.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

#include <type_traits>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

enum class ReduceOp { Sum, Max };

/// `kWorkgroup` invocations per workgroup (a 1-D workgroup), `kWidth` elements per load.
template <ReduceOp Op, int kWorkgroup, int kWidth = 1>
void reduce(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  using Combine = std::conditional_t<Op == ReduceOp::Sum, dsl::Plus, dsl::Maximum>;
  Combine op;
  dsl::WorkgroupOps<float, kWorkgroup> wg;

  // Each invocation folds its elements in a register (the identity where it has none).
  dsl::Var<float> acc = Combine::template identity<float>();
  auto one_at_a_time = [&] {
    dsl::grid_stride_for(in.size(), [&](dsl::Val<uint32_t> i) { acc = op(acc, in(i)); });
  };
  if constexpr (kWidth == 1) {
    one_at_a_time();
  } else {
    dsl::if_(in.stride(0) == 1u, [&] {
      dsl::Val<uint32_t> groups = in.size() / kWidth;
      dsl::Var<dsl::Vec<float, kWidth>> lanes =
          dsl::splat<kWidth>(Combine::template identity<float>());
      dsl::grid_stride_for(groups, [&](dsl::Val<uint32_t> g) {
        lanes = op(lanes, in.template load<kWidth>(g * kWidth));
      });
      for (int l = 0; l < kWidth; ++l)
        acc = op(acc, dsl::lane(lanes, dsl::Val<uint32_t>(static_cast<uint32_t>(l))));
      dsl::Val<uint32_t> tail = groups * kWidth + dsl::global_id().x;
      dsl::if_(dsl::global_id().x < kWidth && tail < in.size(), [&] { acc = op(acc, in(tail)); });
    }).else_(one_at_a_time);
  }

  dsl::Val<float> total = wg.reduce(acc, op);
  dsl::if_(dsl::local_index() == 0u, [&] { out(dsl::workgroup_id().x) = total; });
}

static const bool registered_reduce =
    dsl::register_kernel<reduce<ReduceOp::Sum, 256>>(
        "reduce_sum", "op=sum,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}}) &&
    dsl::register_kernel<reduce<ReduceOp::Max, 256>>(
        "reduce_max", "op=max,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}}) &&
    dsl::register_kernel<reduce<ReduceOp::Sum, 256, 4>>(
        "reduce_sum_w4", "op=sum,workgroup=256,width=4",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void reduce<ReduceOp::Sum, 256>(dsl::Tensor<const float>, dsl::Tensor<float>);
template void reduce<ReduceOp::Max, 256>(dsl::Tensor<const float>, dsl::Tensor<float>);
template void reduce<ReduceOp::Sum, 256, 4>(dsl::Tensor<const float>, dsl::Tensor<float>);

} // namespace cubecc::examples
