// Kernels for test/lit/dsl/reach.test: the DSL constructs of docs/dsl.md beyond the basics.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void masked_shift(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  out[i] = dsl::load(in, i + 2u, i + 2u < in.size(), -1.0f);
}

void unsigned_loop(dsl::Tensor<float> y) {
  dsl::Var<bool> seen = false;
  dsl::for_(0u, 4u, [&](dsl::Val<uint32_t> k) { dsl::if_(y[k] < 0.0f, [&] { seen = true; }); });
  y.store<4>(0u, y.load<4>(0u) * dsl::splat<4>(0.5f));
  dsl::if_(seen, [&] { y[0u] = 0.0f; });
}

void vectors(dsl::Tensor<float> y, dsl::Scalar<uint32_t> k) {
  dsl::Val<dsl::Vec<float, 4>> v = dsl::vec<float>(y[0u], y[1u], 2.0f, 3.0f);
  dsl::Val<dsl::Vec<float, 4>> w = dsl::with_lane<1>(v, 5.0f);
  y[0u] = dsl::hsum(w) + dsl::dot(v, w) + dsl::lane(v, k);
}

void bits(dsl::Tensor<uint32_t> y, dsl::Scalar<int32_t> a, dsl::Scalar<int32_t> b) {
  y[0u] = dsl::popcount(y[1u]) + dsl::clz(y[2u]) + dsl::ctz(y[3u]) + dsl::ffs(y[4u]) +
          dsl::bitreverse(y[5u]);
  y[6u] = dsl::bitcast<uint32_t>(dsl::mulhi(a, b) + dsl::add_sat(a, b) + dsl::sub_sat(a, 7));
}

void switch_chain(dsl::Tensor<uint32_t> y, dsl::Scalar<int32_t> k) {
  dsl::switch_(k, dsl::case_(3, [&] { y[0u] = 30u; }), dsl::case_(-1, [&] { y[0u] = 10u; }),
               dsl::default_([&] { y[0u] = 0u; }));
}

void early_return(dsl::Tensor<uint32_t> y, dsl::Scalar<uint32_t> k) {
  dsl::if_(k == 0u, [&] { dsl::return_(); });
  y[0u] = 1u;
  dsl::for_(0u, k, [&](dsl::Val<uint32_t> a) {
    dsl::for_(0u, k, [&](dsl::Val<uint32_t> b) { dsl::if_(a * b == k, [&] { dsl::break_(2); }); });
  });
  y[1u] = 2u;
}

void short_circuit(dsl::Tensor<const float> x, dsl::Tensor<uint32_t> y, dsl::Scalar<uint32_t> n) {
  auto i = dsl::global_id().x;
  dsl::if_(i < n && x[i] > 0.0f, [&] { y[i] = 1u; });
  dsl::if_(i < n || i > 3u, [&] { y[i] = 2u; });
}

void views(dsl::Tensor<const uint8_t> raw, dsl::Tensor<float> y, dsl::Scalar<uint32_t> start) {
  auto words = dsl::view<uint32_t>(raw);
  auto window = dsl::slice(y, start, 8u);
  window[1u] = dsl::bitcast<float>(words[2u]);
}

void workgroup_calls(dsl::Tensor<float> y) {
  dsl::WorkgroupOps<float, 64> wg;
  dsl::Val<float> v = y[dsl::local_index()];
  dsl::Val<float> total = wg.reduce(v, dsl::plus); // the first call: no barrier before it
  dsl::Val<float> before = wg.exclusive_scan(v, dsl::maximum); // a barrier first
  dsl::Var<float> acc = 0.0f;
  dsl::for_(0u, 2u, [&](dsl::Val<uint32_t>) {
    dsl::WorkgroupOps<float, 64> inner;
    acc += inner.inclusive_scan(v, dsl::plus); // first call, in a loop: a barrier first
  });
  y[dsl::local_index()] = total + before + acc;
}

static const bool registered =
    dsl::register_kernel<masked_shift>("masked_shift") &&
    dsl::register_kernel<unsigned_loop>("unsigned_loop") &&
    dsl::register_kernel<vectors>("vectors") && dsl::register_kernel<bits>("bits") &&
    dsl::register_kernel<switch_chain>("switch_chain") &&
    dsl::register_kernel<early_return>("early_return") &&
    dsl::register_kernel<short_circuit>("short_circuit") && dsl::register_kernel<views>("views") &&
    dsl::register_kernel<workgroup_calls>("workgroup_calls", "", {.workgroup = {64, 1, 1}});
