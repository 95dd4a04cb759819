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
// Within a block: every subgroup scans its lanes with a subgroup scan; the last lane of each
// subgroup writes the subgroup's total to shared memory; after a barrier, each invocation adds
// the totals of the subgroups before its own. Launch ceil(n / kWorkgroup) workgroups; `out` has
// the shape of `in` and `block_sums` one element per workgroup.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

/// `kWorkgroup` invocations per (1-D) workgroup, one element each.
template <class T, int kWorkgroup>
void prefix_sum(dsl::Tensor<const T> in, dsl::Tensor<T> out, dsl::Tensor<T> block_sums) {
  // One slot per subgroup; as many as invocations covers a subgroup size of 1.
  dsl::Shared<T, kWorkgroup> subgroup_totals;

  dsl::Val<uint32_t> n = in.size();
  dsl::Val<uint32_t> local = dsl::local_index();
  dsl::Val<uint32_t> block = dsl::workgroup_id().x;
  dsl::Val<uint32_t> i = block * kWorkgroup + local;
  dsl::Val<uint32_t> lane = dsl::subgroup_lane();
  dsl::Val<uint32_t> subgroup = dsl::subgroup_id();

  // Invocations past the end scan a zero, so that every lane takes part in the subgroup scan.
  dsl::Var<T> x = T(0);
  dsl::if_(i < n, [&] { x = in(i); });
  dsl::Val<T> within_subgroup = dsl::subgroup_inclusive_sum(x);

  // The last lane of a subgroup holds its total (the last subgroup may be partial, so the
  // workgroup's last invocation counts as a last lane too).
  dsl::Val<bool> last_lane = lane == dsl::subgroup_size() - 1u || local == kWorkgroup - 1u;
  dsl::if_(last_lane, [&] { subgroup_totals[subgroup] = within_subgroup; });
  dsl::barrier();

  // The totals of the subgroups before this one. A loop rather than a second subgroup scan: it
  // is correct for any number of subgroups, including more subgroups than a subgroup has lanes.
  dsl::Var<T> before = T(0);
  dsl::for_(0u, subgroup, [&](dsl::Val<uint32_t> s) { before += subgroup_totals[s]; });
  dsl::Val<T> inclusive = within_subgroup + before;

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
