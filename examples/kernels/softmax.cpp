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
// softmax_w4 makes each sweep with 128-bit loads and stores (kWidth = 4 columns at a time) where
// the rows allow it: unit column strides and row strides that are multiples of 4 (a uniform
// test); the columns past the last group of 4 are done one at a time, and other layouts take the
// one-column sweeps.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

#include <limits>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

/// One sweep over a row's columns first, first + kWorkgroup, ...: `scalar(c)` for each. With
/// kWidth > 1 and rows that allow it, `vector(c)` for each group of kWidth columns from c, then
/// `scalar` for the columns past the last group.
template <int kWorkgroup, int kWidth, class S, class V>
void sweep(const dsl::Tensor<const float, 2> &in, const dsl::Tensor<float, 2> &out,
           const dsl::Val<uint32_t> &first, S &&scalar, V &&vector) {
  dsl::Val<uint32_t> cols = in.shape(1);
  auto one_at_a_time = [&] {
    dsl::for_(first, cols, kWorkgroup, [&](dsl::Val<uint32_t> c) { scalar(c); });
  };
  if constexpr (kWidth == 1) {
    one_at_a_time();
  } else {
    dsl::Val<bool> wide = in.stride(1) == 1u && out.stride(1) == 1u &&
                          in.stride(0) % kWidth == 0u && out.stride(0) % kWidth == 0u;
    dsl::if_(wide, [&] {
      dsl::Val<uint32_t> whole = cols / kWidth * kWidth;
      dsl::for_(first * kWidth, whole, kWorkgroup * kWidth,
                [&](dsl::Val<uint32_t> c) { vector(c); });
      dsl::Val<uint32_t> tail = whole + first;
      dsl::if_(tail < cols, [&] { scalar(tail); });
    }).else_(one_at_a_time);
  }
}

template <int kWorkgroup, int kWidth = 1>
void softmax(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out) {
  dsl::WorkgroupOps<float, kWorkgroup> wg;
  dsl::Val<uint32_t> row = dsl::workgroup_id().x;
  dsl::Val<uint32_t> first = dsl::local_index();
  auto each = [&](auto &&scalar, auto &&vector) {
    sweep<kWorkgroup, kWidth>(in, out, first, scalar, vector);
  };
  // kWidth columns of `in` (or `out`) from column c of the row.
  auto load = [&](const auto &c) { return in.template load<kWidth>(row * in.stride(0) + c); };
  auto splat = [](const auto &x) { return dsl::splat<kWidth>(x); };
  using Lanes = dsl::Var<dsl::Vec<float, kWidth == 1 ? 2 : kWidth>>; // (unused when kWidth = 1)

  // `row` is the same for the whole workgroup, so every invocation reaches the barriers inside.
  dsl::if_(row < in.shape(0), [&] {
    dsl::Var<float> running_max = -std::numeric_limits<float>::infinity();
    auto max_of = [&](dsl::Val<uint32_t> c) { running_max = dsl::max(running_max, in(row, c)); };
    if constexpr (kWidth == 1) {
      each(max_of, nullptr);
    } else {
      Lanes lanes = dsl::splat<kWidth>(-std::numeric_limits<float>::infinity());
      each(max_of, [&](dsl::Val<uint32_t> c) { lanes = dsl::max(lanes, load(c)); });
      running_max = dsl::max(running_max, dsl::hmax(lanes));
    }
    dsl::Val<float> row_max = wg.reduce(running_max, dsl::maximum);

    dsl::Var<float> running_sum = 0.0f;
    auto sum_of = [&](dsl::Val<uint32_t> c) { running_sum += dsl::exp(in(row, c) - row_max); };
    if constexpr (kWidth == 1) {
      each(sum_of, nullptr);
    } else {
      Lanes lanes = dsl::splat<kWidth>(0.0f);
      each(sum_of, [&](dsl::Val<uint32_t> c) { lanes += dsl::exp(load(c) - splat(row_max)); });
      running_sum += dsl::hsum(lanes);
    }
    dsl::Val<float> row_sum = wg.reduce(running_sum, dsl::plus);

    each([&](dsl::Val<uint32_t> c) { out(row, c) = dsl::exp(in(row, c) - row_max) / row_sum; },
         [&](dsl::Val<uint32_t> c) {
           if constexpr (kWidth > 1)
             out.template store<kWidth>(row * out.stride(0) + c,
                                        dsl::exp(load(c) - splat(row_max)) / splat(row_sum));
         });
  });
}

static const bool registered_softmax =
    dsl::register_kernel<softmax<256>>(
        "softmax", "workgroup=256", {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}}) &&
    dsl::register_kernel<softmax<256, 4>>(
        "softmax_w4", "workgroup=256,width=4",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "out"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void softmax<256>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);
template void softmax<256, 4>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);

} // namespace cubecc::examples
