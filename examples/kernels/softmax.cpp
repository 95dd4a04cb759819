//===- softmax.cpp - Numerically stable softmax over each row of a 2-D tensor -----------------===//
//
// out(r, c) = exp(in(r, c) - max_r) / sum_c' exp(in(r, c') - max_r), where max_r is the row's
// maximum: subtracting it keeps every exp in (0, 1], so large inputs do not overflow.
//
// One workgroup per row (launch as many workgroups as rows; `out` has the shape of `in`). The
// workgroup's invocations stride over the row's columns three times: to find the maximum, to sum
// the exponentials, and to write the normalized values. Each sweep's result is combined across
// the workgroup by a subgroup reduction, per-subgroup partials in shared memory and a barrier.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

#include <limits>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

namespace {

enum class Combine { Max, Sum };

/// The workgroup-wide max or sum of `v`, returned to every invocation. Must be reached by every
/// invocation of the workgroup (it has barriers). `scratch` holds one slot per subgroup; its
/// contents are free again when this returns.
template <Combine Op, int N>
dsl::Val<float> workgroup_reduce(const dsl::Var<float> &v, const dsl::Shared<float, N> &scratch) {
  auto combine = [](const auto &a, const auto &b) {
    if constexpr (Op == Combine::Max)
      return dsl::max(a, b);
    else
      return a + b;
  };
  auto subgroup_reduce = [](const auto &x) {
    if constexpr (Op == Combine::Max)
      return dsl::subgroup_max(x);
    else
      return dsl::subgroup_sum(x);
  };
  constexpr float identity = Op == Combine::Max ? -std::numeric_limits<float>::infinity() : 0.0f;

  dsl::Val<uint32_t> lane = dsl::subgroup_lane();
  dsl::Val<uint32_t> subgroup = dsl::subgroup_id();
  dsl::Val<float> partial = subgroup_reduce(v);
  dsl::if_(lane == 0u, [&] { scratch[subgroup] = partial; });
  dsl::barrier();
  // Every subgroup folds all the partials (striding by the subgroup size, so any number of
  // subgroups works), which leaves the total in every invocation without another round trip.
  dsl::Var<float> acc = identity;
  dsl::for_(lane, dsl::num_subgroups(), dsl::subgroup_size(),
            [&](dsl::Val<uint32_t> s) { acc = combine(acc, scratch[s]); });
  dsl::Val<float> total = subgroup_reduce(acc);
  // Every invocation has read the partials before `scratch` may be written again.
  dsl::barrier();
  return total;
}

} // namespace

template <int kWorkgroup> void softmax(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out) {
  // One slot per subgroup; as many as invocations covers a subgroup size of 1.
  dsl::Shared<float, kWorkgroup> scratch;
  dsl::Val<uint32_t> row = dsl::workgroup_id().x;
  dsl::Val<uint32_t> cols = in.shape(1);
  dsl::Val<uint32_t> first = dsl::local_index();

  // `row` is the same for the whole workgroup, so every invocation reaches the barriers inside.
  dsl::if_(row < in.shape(0), [&] {
    dsl::Var<float> running_max = -std::numeric_limits<float>::infinity();
    dsl::for_(first, cols, kWorkgroup,
              [&](dsl::Val<uint32_t> c) { running_max = dsl::max(running_max, in(row, c)); });
    dsl::Val<float> row_max = workgroup_reduce<Combine::Max>(running_max, scratch);

    dsl::Var<float> running_sum = 0.0f;
    dsl::for_(first, cols, kWorkgroup,
              [&](dsl::Val<uint32_t> c) { running_sum += dsl::exp(in(row, c) - row_max); });
    dsl::Val<float> row_sum = workgroup_reduce<Combine::Sum>(running_sum, scratch);

    dsl::for_(first, cols, kWorkgroup, [&](dsl::Val<uint32_t> c) {
      out(row, c) = dsl::exp(in(row, c) - row_max) / row_sum;
    });
  });
}

static const bool registered_softmax = dsl::register_kernel<softmax<256>>(
    "softmax", "workgroup=256", {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void softmax<256>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);

} // namespace cubecc::examples
