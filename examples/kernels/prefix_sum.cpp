//===- prefix_sum.cpp - Inclusive prefix sum within each workgroup's block --------------------===//
//
// out(i) = in(b) + in(b + 1) + ... + in(i), where b is the first element of i's block of
// kWorkgroup elements; block_sums(w) = the sum of block w (zeros past the end of `in`).
//
// Limitation: this is one pass of a multi-pass scan. Each workgroup scans its own block of
// kWorkgroup consecutive elements; the blocks do not see each other. For a scan of the whole
// tensor, scan `block_sums` (again with this kernel, recursively while it has more than one
// block) and add block_sums' exclusive prefix for block w to every element of block w of `out`.
// With a single workgroup (n <= kWorkgroup) `out` is already the full scan.
//
// Within a block: dsl::WorkgroupOps::inclusive_scan (every subgroup scans its lanes with a
// subgroup scan, the last lane of each writes the subgroup's total to shared memory, and after a
// barrier each invocation adds the totals of the subgroups before its own). Launch
// ceil(n / kWorkgroup) workgroups; `out` has the shape of `in` and `block_sums` one element per
// workgroup.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

/// `kWorkgroup` invocations per (1-D) workgroup, one element each.
template <class T, int kWorkgroup>
void prefix_sum(dsl::Tensor<const T> in, dsl::Tensor<T> out, dsl::Tensor<T> block_sums) {
  dsl::WorkgroupOps<T, kWorkgroup> wg;
  dsl::Val<uint32_t> n = in.size();
  dsl::Val<uint32_t> local = dsl::local_index();
  dsl::Val<uint32_t> block = dsl::workgroup_id().x;
  dsl::Val<uint32_t> i = block * kWorkgroup + local;

  // Invocations past the end scan a zero: every invocation takes part in the scan.
  dsl::Var<T> x = T(0);
  dsl::if_(i < n, [&] { x = in(i); });
  dsl::Val<T> inclusive = wg.inclusive_scan(x, dsl::plus);

  dsl::if_(i < n, [&] { out(i) = inclusive; });
  dsl::if_(local == kWorkgroup - 1u, [&] { block_sums(block) = inclusive; });
}

static const bool registered_prefix_sum =
    dsl::register_kernel<prefix_sum<uint32_t, 256>>(
        "prefix_sum_u32", "type=u32,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out", "block_sums"}}) &&
    dsl::register_kernel<prefix_sum<float, 256>>(
        "prefix_sum_f32", "type=f32,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out", "block_sums"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void prefix_sum<uint32_t, 256>(dsl::Tensor<const uint32_t>, dsl::Tensor<uint32_t>,
                                        dsl::Tensor<uint32_t>);
template void prefix_sum<float, 256>(dsl::Tensor<const float>, dsl::Tensor<float>,
                                     dsl::Tensor<float>);

} // namespace cubecc::examples
