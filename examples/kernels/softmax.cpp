//===- softmax.cpp - Numerically stable softmax over each row of a 2-D tensor -----------------===//
//
// out(r, c) = exp(in(r, c) - max_r) / sum_c' exp(in(r, c') - max_r), where max_r is the row's
// maximum: subtracting it keeps every exp in (0, 1], so large inputs do not overflow.
//
// One workgroup per row (launch as many workgroups as rows; `out` has the shape of `in`). The
// workgroup's invocations stride over the row's columns three times: to find the maximum, to sum
// the exponentials, and to write the normalized values. Each sweep's result is combined across
// the workgroup by dsl::WorkgroupOps::reduce.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

#include <limits>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

template <int kWorkgroup> void softmax(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out) {
  dsl::WorkgroupOps<float, kWorkgroup> wg;
  dsl::Val<uint32_t> row = dsl::workgroup_id().x;
  dsl::Val<uint32_t> cols = in.shape(1);
  dsl::Val<uint32_t> first = dsl::local_index();

  // `row` is the same for the whole workgroup, so every invocation reaches the barriers inside.
  dsl::if_(row < in.shape(0), [&] {
    dsl::Var<float> running_max = -std::numeric_limits<float>::infinity();
    dsl::for_(first, cols, kWorkgroup,
              [&](dsl::Val<uint32_t> c) { running_max = dsl::max(running_max, in(row, c)); });
    dsl::Val<float> row_max = wg.reduce(running_max, dsl::maximum);

    dsl::Var<float> running_sum = 0.0f;
    dsl::for_(first, cols, kWorkgroup,
              [&](dsl::Val<uint32_t> c) { running_sum += dsl::exp(in(row, c) - row_max); });
    dsl::Val<float> row_sum = wg.reduce(running_sum, dsl::plus);

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
