//===- dsl_reach_test.cpp - DSL constructs beyond the basics, traced and run on every device
//---===//
//
// Kernels written with the DSL conveniences that a peer's suite needed (issue 19): a masked load
// that never reads where its mask is false, for_ over C++ unsigned bounds (a uint32_t index), a
// Var<bool>, splat of a plain C++ number, vectors built from lanes with a lane replaced or picked
// by a runtime index and horizontal sum/min/max/dot, and the inverse trigonometric, hyperbolic
// and C99 functions with is_nan / is_inf, bit counting, mulhi and saturating arithmetic. Each
// kernel is traced once, then run on interp, vulkan and cpu (and cuda and hip where they open), and
// its outputs are compared with a host reference.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/dsl.h"
#include "cubecc/ir/printer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <numbers>
#include <random>

namespace dsl = cubecc::dsl;

namespace {

// out[i] = in[i + 2], or -1 where i + 2 is past the end of `in`: those elements are never read
// (the interpreter refuses an out-of-bounds read, so an unguarded load would fail the launch).
void masked_shift(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < out.size(), [&] {
    dsl::Val<uint32_t> j = i + 2u;
    out[i] = dsl::load(in, j, j < in.size(), -1.0f);
  });
}

// out[i] = the sum of x[4i .. 4i + 3], negated when any of them is negative; half[4i .. 4i + 3]
// are halved as one float4 times splat<4>(0.5f).
void unsigned_loop_and_bool_var(dsl::Tensor<const float> x, dsl::Tensor<float> out,
                                dsl::Tensor<float> half) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < out.size(), [&] {
    dsl::Var<float> sum = 0.0f;
    dsl::Var<bool> any_negative = false;
    dsl::for_(0u, 4u, [&](dsl::Val<uint32_t> k) { // C++ unsigned bounds: a uint32_t index
      dsl::Val<float> v = x[i * 4u + k];
      sum += v;
      dsl::if_(v < 0.0f, [&] { any_negative = true; });
    });
    out[i] = dsl::select(any_negative, -sum, sum);
    half.store<4>(i * 4u, half.load<4>(i * 4u) * dsl::splat<4>(0.5f));
  });
}

// out[i] = 2 x[i]; each invocation below the end prints its index, its value, a bool, a 64-bit
// integer (negative for the first three) and escaped braces (docs/dsl.md, "Printing").
void print_values(dsl::Tensor<const float> x, dsl::Tensor<float> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < x.size(), [&] {
    dsl::Val<float> v = x[i];
    dsl::print("i={} x={} negative={} wide={} {{ok}} 100%\n", i, v, v < 0.0f,
               dsl::cast<int64_t>(i) - int64_t{3});
    out[i] = v * 2.0f;
  });
}

// Prints around barriers: two rounds of a loop with a barrier in each (on the CPU such a loop
// runs at workgroup level, its body in segments), a print after the barrier and one under a
// condition that varies by invocation; each round passes values through shared memory.
void print_in_barrier_loop(dsl::Tensor<uint32_t> out) {
  dsl::Shared<uint32_t, 16> slots;
  dsl::Val<uint32_t> li = dsl::local_index();
  dsl::Var<uint32_t> acc = li;
  dsl::for_(0u, 2u, [&](dsl::Val<uint32_t> round) {
    slots[li] = acc;
    dsl::barrier();
    dsl::Val<uint32_t> next = slots[(li + 1u) % 16u];
    dsl::print("round {} invocation {} got {}\n", round, li, next);
    dsl::if_((li & 1u) == 1u, [&] { dsl::print("odd {}\n", li); });
    dsl::barrier();
    acc = acc + next;
  });
  out[li] = acc;
}

// The functions added to the DSL, and the classifications of their results.
void more_math(dsl::Tensor<const float> x, dsl::Tensor<float> out, dsl::Tensor<uint32_t> flags) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < x.size(), [&] {
    dsl::Val<float> v = x[i];
    dsl::Val<float> unit = v * 0.1f; // in (-1, 1)
    out[i * 4u] = dsl::atan2(v, 1.5f) + dsl::hypot(v, 2.0f) + dsl::tan(unit) + dsl::asin(unit) +
                  dsl::acos(unit) + dsl::atan(v);
    out[i * 4u + 1u] = dsl::sinh(unit) + dsl::cosh(unit) + dsl::asinh(v) +
                       dsl::acosh(dsl::abs(v) + 1.0f) + dsl::atanh(unit * 0.5f);
    out[i * 4u + 2u] = dsl::expm1(unit) + dsl::log1p(dsl::abs(v)) + dsl::trunc(v);
    dsl::Val<float> r = dsl::log(v); // NaN below 0, -inf at 0
    out[i * 4u + 3u] = r;
    flags[i] = dsl::cast<uint32_t>(dsl::is_nan(r)) + dsl::cast<uint32_t>(dsl::is_inf(r)) * 2u;
  });
}

// Vectors from lanes, a lane replaced, a lane picked by a runtime index, horizontal operations.
void vectors(dsl::Tensor<const float> x, dsl::Tensor<const uint32_t> pick, dsl::Tensor<float> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < pick.size(), [&] {
    dsl::Val<uint32_t> b = i * 4u;
    dsl::Val<dsl::Vec<float, 4>> v = dsl::vec<float>(x[b], x[b + 1u], x[b + 2u], x[b + 3u]);
    dsl::Var<dsl::Vec<float, 4>> w = v;
    w = dsl::with_lane<2>(w, 10.0f);
    out[i * 5u] = dsl::hsum(w);
    out[i * 5u + 1u] = dsl::hmin(v);
    out[i * 5u + 2u] = dsl::hmax(v);
    out[i * 5u + 3u] = dsl::dot(v, w);
    out[i * 5u + 4u] = dsl::lane(v, pick[i]); // lane 0 when pick[i] > 3
  });
}

// Bit counting, the high half of products and saturating arithmetic on int32 and uint8 values.
void bit_ops(dsl::Tensor<const int32_t> a, dsl::Tensor<const int32_t> b, dsl::Tensor<int32_t> out,
             dsl::Tensor<const uint8_t> u, dsl::Tensor<uint8_t> uout) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < a.size(), [&] {
    dsl::Val<int32_t> x = a[i], y = b[i];
    out[i * 8u] = dsl::popcount(x);
    out[i * 8u + 1u] = dsl::clz(x);
    out[i * 8u + 2u] = dsl::ctz(x);
    out[i * 8u + 3u] = dsl::ffs(x);
    out[i * 8u + 4u] = dsl::bitreverse(x);
    out[i * 8u + 5u] = dsl::mulhi(x, y);
    out[i * 8u + 6u] = dsl::add_sat(x, y);
    out[i * 8u + 7u] = dsl::sub_sat(x, y);
    dsl::Val<uint8_t> v = u[i];
    uout[i * 2u] = dsl::add_sat(v, v);                               // 255 where 2v overflows
    uout[i * 2u + 1u] = dsl::sub_sat(dsl::popcount(v), dsl::clz(v)); // 0 where it would wrap
  });
}

// Subgroup products, and shuffles whose source lane is outside the subgroup (the own value).
void subgroup_reach(dsl::Tensor<const float> x, dsl::Tensor<float> out,
                    dsl::Tensor<uint32_t> where) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::Val<float> v = x[i];
  out[i * 3u] = dsl::subgroup_inclusive_product(v);
  out[i * 3u + 1u] = dsl::subgroup_shuffle_up(v, 1u);                     // own value in lane 0
  out[i * 3u + 2u] = dsl::subgroup_shuffle(v, dsl::subgroup_size() + 3u); // own value everywhere
  where[i * 2u] = dsl::subgroup_lane();
  where[i * 2u + 1u] = dsl::subgroup_size();
}

// Float atomic min and max; atomic store and load.
void atomics_reach(dsl::Tensor<const float> x, dsl::Tensor<float> extremes,
                   dsl::Tensor<uint32_t> cells, dsl::Tensor<uint32_t> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < x.size(), [&] {
    dsl::atomic_min(extremes[0u], x[i]);
    dsl::atomic_max(extremes[1u], x[i]);
    dsl::atomic_store(cells[i], i * 3u);
    out[i] = dsl::atomic_load(cells[i]) + 1u;
  });
}

// Vector atomics (one atomic per lane: lane l on element i + l) and float atomic_sub.
void vector_atomics(dsl::Tensor<const float> x, dsl::Tensor<float> sums,
                    dsl::Tensor<float> extremes, dsl::Tensor<float> cells,
                    dsl::Tensor<float> loaded) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i * 4u < x.size(), [&] {
    dsl::Val<dsl::Vec<float, 4>> v = x.load<4>(i * 4u);
    dsl::atomic_add(sums[0u], v);
    dsl::atomic_sub(sums[4u], v);
    dsl::atomic_max(extremes[0u], v);
    dsl::atomic_store(cells[i * 4u], v * dsl::splat<4>(2.0f));
    loaded.store<4>(i * 4u, dsl::atomic_load<4>(cells[i * 4u]));
  });
}

// Matrices of 8-bit integers and of mixed fp8 (docs/ir.md §2.2): D = A (16x32 i8) B (32x8 u8,
// row-major) + C (i32); F = A (e4m3) B (e5m2, column-major) + 0.5. Every subgroup of the
// workgroup computes and stores the same D and F (one subgroup on a GPU, several on the CPU).
void int8_and_mixed_fp8_products(dsl::Tensor<const int8_t> a, dsl::Tensor<const uint8_t> b,
                                 dsl::Tensor<const int32_t> c, dsl::Tensor<int32_t> d,
                                 dsl::Tensor<const dsl::e4m3> fa, dsl::Tensor<const dsl::e5m2> fb,
                                 dsl::Tensor<float> f) {
  using IA = dsl::MatrixA<int8_t, 16, 32>;
  using IB = dsl::MatrixB<uint8_t, 32, 8>;
  using IC = dsl::Accumulator<int32_t, 16, 8>;
  dsl::mma(IA::load(a, 0u, 32u), IB::load(b, 0u, 8u), IC::load(c, 0u, 8u)).store(d, 0u, 8u);
  using FA = dsl::MatrixA<dsl::e4m3, 16, 32>;
  using FB = dsl::MatrixB<dsl::e5m2, 32, 8>;
  using FC = dsl::Accumulator<float, 16, 8>;
  dsl::mma(FA::load(fa, 0u, 32u), FB::load(fb, 0u, 32u, dsl::ColMajor), FC::fill(0.5f))
      .store(f, 0u, 8u);
}

// float operands multiply as tf32 (16x16x8 and 16x8x8; CubeCL's tf32 cmma): each element is
// rounded to 10 fraction bits, ties away from zero, as it enters the product.
void tf32_products(dsl::Tensor<const float> a, dsl::Tensor<const float> b, dsl::Tensor<float> d,
                   dsl::Tensor<float> e) {
  using A = dsl::MatrixA<float, 16, 8>;
  A ma = A::load(a, 0u, 8u);
  dsl::mma(ma, dsl::MatrixB<float, 8, 16>::load(b, 0u, 16u),
           dsl::Accumulator<float, 16, 16>::fill(0.25f))
      .store(d, 0u, 16u);
  dsl::mma(ma, dsl::MatrixB<float, 8, 8>::load(b, 0u, 8u, dsl::ColMajor),
           dsl::Accumulator<float, 16, 8>::fill(-1.0f))
      .store(e, 0u, 8u);
}

// subgroup_barrier (CubeCL's sync_plane): each invocation writes its slot, its subgroup waits,
// each reads the next lane's slot within its own subgroup (the last lane wraps to the first).
void subgroup_neighbours(dsl::Tensor<uint32_t> out, dsl::Tensor<uint32_t> sizes) {
  dsl::Shared<uint32_t, 64> slots;
  dsl::Val<uint32_t> i = dsl::local_index();
  slots[i] = i * 3u + 1u;
  dsl::subgroup_barrier();
  dsl::Val<uint32_t> size = dsl::subgroup_size();
  out[i] = slots[dsl::subgroup_id() * size + (dsl::subgroup_lane() + 1u) % size];
  sizes[i] = size;
}

// 8- and 16-bit atomics: four u8 counters in one 32-bit word (neighbours contend for it), i16
// max, f16 and bf16 sums.
void narrow_atomics(dsl::Tensor<const uint32_t> x, dsl::Tensor<uint8_t> bytes,
                    dsl::Tensor<int16_t> shorts, dsl::Tensor<dsl::f16> halves,
                    dsl::Tensor<dsl::bf16> brains) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < x.size(), [&] {
    dsl::atomic_add(bytes[i % 4u], dsl::cast<uint8_t>(x[i]));
    dsl::atomic_max(shorts[i % 2u], dsl::cast<int16_t>(x[i]) - int16_t{500});
    dsl::atomic_add(halves[i % 2u], 1.0f);
    dsl::atomic_sub(brains[0u], 1.0f);
  });
}

// global_index() over a 2-D grid of 3-D workgroups (every element written once), and a value
// from workgroup_uniform_load deciding a barrier (uniform, so the verifier accepts it).
void topology_and_uniform_load(dsl::Tensor<uint32_t> out, dsl::Tensor<uint32_t> decided) {
  dsl::Val<uint32_t> g = dsl::global_index();
  out[g] = g + 1u;
  dsl::Shared<uint32_t, 1> flag;
  dsl::if_(dsl::local_index() == 3u, [&] { flag[0u] = dsl::workgroup_id().x + 7u; });
  dsl::Val<uint32_t> f = dsl::workgroup_uniform_load(flag[0u]);
  dsl::Var<uint32_t> r = 0u;
  dsl::if_(f > 0u, [&] {
    dsl::barrier();
    r = f;
  });
  decided[g] = r;
}

// switch_ over an integer, a grid-stride loop and the workgroup primitives: their subgroup paths
// (named ops), their shared-memory trees (a lambda), and calls in a loop.
void control_and_primitives(dsl::Tensor<const uint32_t> x, dsl::Tensor<uint32_t> out,
                            dsl::Tensor<uint32_t> doubled) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::Val<uint32_t> v = x[i]; // the grid covers x exactly (a multiple of 64 elements)
  dsl::Var<uint32_t> kind = 0u;
  dsl::switch_(v % 8u, dsl::case_(0, [&] { kind = 10u; }),
               dsl::case_({2, 5, 7}, [&] { kind = 20u; }), // C's case 2: case 5: case 7:
               dsl::default_([&] { kind = 30u; }));
  dsl::WorkgroupOps<uint32_t, 64> wg;
  auto bit_or = [](auto a, auto b) { return a | b; }; // no subgroup op: a tree
  out[i * 10u] = kind;
  out[i * 10u + 1u] = wg.reduce(v, dsl::plus);
  out[i * 10u + 2u] = wg.inclusive_scan(v, dsl::plus);
  out[i * 10u + 3u] = wg.exclusive_scan(v, dsl::maximum);
  out[i * 10u + 4u] = wg.broadcast(v, 5u);
  out[i * 10u + 5u] = wg.reduce(v, dsl::minimum);
  out[i * 10u + 6u] = wg.reduce(v, bit_or);
  out[i * 10u + 7u] = wg.inclusive_scan(v, bit_or);
  out[i * 10u + 8u] = wg.exclusive_scan(v, dsl::plus);
  dsl::WorkgroupOps<uint32_t, 64> fresh; // its first call is in a loop
  dsl::Var<uint32_t> weighted = 0u;
  dsl::for_(1u, 4u, [&](dsl::Val<uint32_t> k) { weighted += fresh.reduce(v * k, dsl::plus); });
  out[i * 10u + 9u] = weighted;
  dsl::grid_stride_for(doubled.size(), [&](dsl::Val<uint32_t> k) { doubled[k] = k * 2u; });
}

// A rank-3 tensor's shape and strides by a runtime dimension (1 and 0 past the rank), then its
// element count (the shape's product) and its buffer's.
void runtime_dims(dsl::Tensor<float, 3> t, dsl::Tensor<uint32_t> out) {
  dsl::Val<uint32_t> d = dsl::global_id().x;
  dsl::Val<uint32_t> dims = (out.size() - 2u) / 2u;
  dsl::if_(d < dims, [&] {
    out[d * 2u] = t.shape(d);
    out[d * 2u + 1u] = t.stride(d);
  });
  dsl::if_(d == 0u, [&] {
    out[dims * 2u] = t.size();
    out[dims * 2u + 1u] = t.buffer_size();
  });
}

// Storage floats, as an MX-style quantizer would use them: q8 = e4m3(x), q5 = e5m2(100 x),
// scale = the ue8m0 power of two nearest x, q4 = e2m1(x / scale), back = f32(q8) read back from
// memory plus an e4m3 parameter, and wide[4j .. 4j + 3] = f32(q8[4j .. 4j + 3]) through one 4-lane
// vector load.
void storage_floats(dsl::Tensor<const float> x, dsl::Tensor<dsl::e4m3> q8,
                    dsl::Tensor<dsl::e5m2> q5, dsl::Tensor<dsl::e2m1> q4,
                    dsl::Tensor<dsl::ue8m0> scale, dsl::Tensor<float> back, dsl::Tensor<float> wide,
                    dsl::Scalar<dsl::e4m3> bias) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < x.size(), [&] {
    dsl::Val<float> v = x[i];
    q8[i] = dsl::cast<dsl::e4m3>(v);
    q5[i] = dsl::cast<dsl::e5m2>(v * 100.0f);
    dsl::Val<dsl::ue8m0> s = dsl::cast<dsl::ue8m0>(v);
    scale[i] = s;
    q4[i] = dsl::cast<dsl::e2m1>(v / dsl::cast<float>(s));
    back[i] = dsl::cast<float>(q8[i]) + dsl::cast<float>(bias);
  });
  dsl::barrier();
  dsl::if_(i * 4u < x.size(), [&] {
    dsl::Val<dsl::Vec<dsl::e4m3, 4>> four = q8.load<4>(i * 4u);
    wide.store<4>(i * 4u, dsl::cast<dsl::Vec<float, 4>>(four));
  });
}

// Early exits. Invocations past the end and every fifth one return_ at once. The others find
// the first cell of an 8 x 8 grid holding their index (break_(2) leaves both loops), then the
// smallest k with k * k > i inside a loop that return_s from its body: the store after the loop
// never runs.
void early_exits(dsl::Tensor<const uint32_t> grid, dsl::Tensor<uint32_t> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i * 2u >= out.size(), [&] { dsl::return_(); });
  dsl::if_(i % 5u == 4u, [&] { dsl::return_(); });
  dsl::Var<uint32_t> found = 0xffffffffu;
  dsl::for_(0u, 8u, [&](dsl::Val<uint32_t> r) {
    dsl::for_(0u, 8u, [&](dsl::Val<uint32_t> c) {
      dsl::if_(grid[r * 8u + c] == i, [&] {
        found = r * 8u + c;
        dsl::break_(2);
      });
    });
  });
  out[i * 2u] = found;
  dsl::for_(0u, 100u, [&](dsl::Val<uint32_t> k) {
    dsl::if_(k * k > i, [&] {
      out[i * 2u + 1u] = k;
      dsl::return_();
    });
  });
  out[i * 2u + 1u] = 999u;
}

// && and || short-circuit: x has fewer elements than there are invocations, and x[i] is read
// only where i < x.size() (the interpreter refuses a read past the end, so an eager && fails).
void short_circuit(dsl::Tensor<const float> x, dsl::Tensor<uint32_t> out) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::Var<uint32_t> r = 0u;
  dsl::if_(i < x.size() && x[i] > 0.5f, [&] { r += 1u; });
  dsl::if_(i >= x.size() || x[i] < 0.25f, [&] { r += 2u; });
  dsl::if_(i % 2u == 0u && i > 10u, [&] { r += 4u; }); // pure: a plain `and`
  out[i] = r;
}

// Views and slices. words[i] = raw's bytes 4i .. 4i + 3 as one uint32_t (a view), then that
// word seen as a float (a view of words) is doubled in place. A slice of out, from a runtime
// start and length, gets raw's bytes decoded as e4m3 (a view of u8 as e4m3); invocation 0 writes
// 7 into elements 1 and 2 of a slice of the slice that follows it.
void views_and_slices(dsl::Tensor<const uint8_t> raw, dsl::Tensor<uint32_t> words,
                      dsl::Tensor<float> out, dsl::Scalar<uint32_t> start,
                      dsl::Scalar<uint32_t> length) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  auto as_words = dsl::view<uint32_t>(raw);
  auto as_floats = dsl::view<float>(words);
  dsl::if_(i < as_words.size(), [&] {
    words[i] = as_words[i];
    as_floats[i] *= 2.0f;
  });
  auto window = dsl::slice(out, start, length);
  auto e4m3 = dsl::view<dsl::e4m3>(raw);
  dsl::if_(i < window.size(), [&] { window[i] = dsl::cast<float>(e4m3[i]); });
  dsl::if_(i == 0u, [&] {
    auto after = dsl::slice(dsl::slice(out, start + length, 4u), 1u, 2u);
    after[0u] = 7.0f;
    after[1u] = 7.0f;
  });
}

// A view of a slice counts from the slice's start: shifted[i] = raw's bytes
// start + 4i .. start + 4i + 3 as one uint32_t (start a multiple of 4), and twice shifted[0] is
// written through a float view of a slice of `shifted` at its element 15.
void view_of_a_slice(dsl::Tensor<const uint8_t> raw, dsl::Tensor<uint32_t> shifted,
                     dsl::Scalar<uint32_t> start) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  auto words = dsl::view<uint32_t>(dsl::slice(raw, start, raw.size() - start));
  dsl::if_(i < words.size() && i < 15u, [&] { shifted[i] = words[i]; });
  dsl::if_(i == 0u, [&] {
    auto last = dsl::view<float>(dsl::slice(shifted, 15u, 1u));
    last[0u] = dsl::bitcast<float>(words[0u]) * 2.0f;
  });
}

// The conveniences written with other ops (recip, degrees, radians, rhypot, powi, magnitude,
// normalize), a lane replaced at a runtime index, and a rank-2 tensor's coordinates of a flat
// index. out[8k ..] gets the math of x[4k ..], lanes[4k ..] the vector with lane pick[k] set to
// 100, coords[2i], coords[2i + 1] the row and column of flat index i of the 3 x 5 `grid`.
void conveniences(dsl::Tensor<const float> x, dsl::Tensor<const uint32_t> pick,
                  dsl::Tensor<float> out, dsl::Tensor<float> lanes,
                  dsl::Tensor<const float, 2> grid, dsl::Tensor<uint32_t> coords) {
  dsl::Val<uint32_t> k = dsl::global_id().x;
  dsl::if_(k < pick.size(), [&] {
    dsl::Val<float> a = x[k * 4u], b = x[k * 4u + 1u];
    dsl::Val<dsl::Vec<float, 4>> v = x.load<4>(k * 4u);
    dsl::Val<uint32_t> n = pick[k];
    out[k * 8u] = dsl::recip(a);
    out[k * 8u + 1u] = dsl::degrees(a);
    out[k * 8u + 2u] = dsl::radians(a);
    out[k * 8u + 3u] = dsl::rhypot(a, b);
    out[k * 8u + 4u] = dsl::powi(a, n);
    out[k * 8u + 5u] = dsl::magnitude(v);
    dsl::Val<dsl::Vec<float, 4>> unit = dsl::normalize(v);
    out[k * 8u + 6u] = unit.lane<1>();
    out[k * 8u + 7u] = dsl::powi(b, 3);
    lanes.store<4>(k * 4u, dsl::with_lane(v, n, 100.0f));
  });
  dsl::Val<uint32_t> one = 1u; // a runtime dimension
  dsl::if_(k < grid.size(), [&] {
    coords[k * 2u] = grid.coordinate(k, 0);
    coords[k * 2u + 1u] = grid.coordinate(k, one);
  });
}

/// The lines of printed text (each with its newline), sorted: the order between invocations is
/// unspecified.
std::vector<std::string> sorted_lines(const std::string &text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    lines.push_back(text.substr(at, end - at));
    at = end;
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::unique_ptr<cubecc::ir::Module> traced(dsl::TraceResult result) {
  EXPECT_TRUE(result.module) << cubecc::ir::to_string(result.errors);
  return std::move(result.module);
}

/// The arguments of a launch: Tensor<T> parameters as buffer, shape, stride.
class Args {
public:
  /// A rank-1 tensor of `elements` with stride 1.
  template <class T>
  size_t tensor(cubecc::ir::Scalar element, const std::vector<T> &data, uint32_t elements) {
    return tensor(element, data, {elements}, {1});
  }
  /// A tensor with the given shape and strides (Tensor<T, Rank>: the shapes, then the strides).
  template <class T>
  size_t tensor(cubecc::ir::Scalar element, const std::vector<T> &data,
                std::initializer_list<uint64_t> shape, std::initializer_list<uint64_t> strides) {
    cubecc::ir::HostBuffer &b = buffers_.emplace_back(
        cubecc::ir::HostBuffer{element, std::vector<uint8_t>(data.size() * sizeof(T))});
    std::memcpy(b.bytes.data(), data.data(), b.bytes.size());
    args_.push_back({&b, {}});
    for (std::initializer_list<uint64_t> values : {shape, strides})
      for (uint64_t v : values)
        args_.push_back({nullptr, {v}});
    return buffers_.size() - 1;
  }
  /// A Scalar<T> parameter: its bits (integers zero-extended, floats their IEEE bits).
  void scalar(uint64_t bits) { args_.push_back({nullptr, {bits}}); }
  template <class T> std::vector<T> read(size_t handle) const {
    const cubecc::ir::HostBuffer &b = buffers_[handle];
    std::vector<T> out(b.bytes.size() / sizeof(T));
    std::memcpy(out.data(), b.bytes.data(), b.bytes.size());
    return out;
  }
  std::span<const cubecc::ir::Argument> args() const { return args_; }

private:
  std::deque<cubecc::ir::HostBuffer> buffers_;
  std::vector<cubecc::ir::Argument> args_;
};

/// Four floats per k < n (in [-4, 4.25], never 0) and a pick k % 6 per k (lanes 0-3, then two
/// out of range; as an exponent 0-5).
std::pair<std::vector<float>, std::vector<uint32_t>> vectors_and_picks(uint32_t n) {
  std::vector<float> x(4 * n);
  std::vector<uint32_t> pick(n);
  for (uint32_t k = 0; k < 4 * n; ++k)
    x[k] = static_cast<float>((k * 37) % 23) * 0.375f - 4;
  for (uint32_t k = 0; k < n; ++k)
    pick[k] = k % 6;
  return {x, pick};
}

class DslReach : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam()); }
  /// The launch's problems on this test's device (none: it ran), over a grid of workgroups.
  std::vector<cubecc::ir::Diagnostic> launch(const cubecc::ir::Kernel &kernel, const Args &args,
                                             std::array<uint32_t, 3> grid) {
    cubecc::ir::LaunchConfig config;
    config.num_workgroups = grid;
    return cubecc::test::run_on_device(cubecc::test::shared_device(GetParam()), kernel, args.args(),
                                       config);
  }
  /// Whether a launch of the 8-bit, mixed-fp8 or tf32 matrix kernels ran: lavapipe has no
  /// cooperative matrices and HIP's MFMA path none of those shapes, so there it must have been
  /// refused, naming what the target does not support.
  bool matrix_launch_ran(const std::vector<cubecc::ir::Diagnostic> &problems) {
    if (GetParam() == "vulkan" || GetParam() == "hip") {
      EXPECT_NE(cubecc::ir::to_string(problems).find("does not support"), std::string::npos)
          << cubecc::ir::to_string(problems);
      return false;
    }
    EXPECT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
    return problems.empty();
  }
  void run(const cubecc::ir::Kernel &kernel, const Args &args, uint32_t workgroups) {
    std::vector<cubecc::ir::Diagnostic> problems = launch(kernel, args, {workgroups, 1, 1});
    ASSERT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
  }
};

TEST_P(DslReach, a_masked_load_reads_only_where_its_mask_is_true) {
  auto module = traced(dsl::trace<masked_shift>("masked_shift", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 100;
  std::vector<float> in(n);
  for (uint32_t k = 0; k < n; ++k)
    in[k] = 0.25f * static_cast<float>(k) - 3;
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, in, n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(n, 7.0f), n);
  run(*module->kernels()[0], args, (n + 63) / 64);
  std::vector<float> got = args.read<float>(out);
  for (uint32_t k = 0; k < n; ++k)
    EXPECT_EQ(got[k], k + 2 < n ? in[k + 2] : -1.0f) << "element " << k;
}

TEST_P(DslReach, unsigned_loop_bounds_a_bool_var_and_a_splatted_literal) {
  auto module = traced(dsl::trace<unsigned_loop_and_bool_var>("unsigned_loop_and_bool_var",
                                                              {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 70;
  std::vector<float> x(4 * n), half(4 * n);
  for (uint32_t k = 0; k < 4 * n; ++k) {
    x[k] = (k % 7 == 3 && k % 8 < 4) ? -1.5f : 0.5f * static_cast<float>(k % 5);
    half[k] = static_cast<float>(k);
  }
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, 4 * n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(n, 7.0f), n);
  size_t halves = args.tensor(cubecc::ir::Scalar::F32, half, 4 * n);
  run(*module->kernels()[0], args, (n + 63) / 64);
  std::vector<float> got = args.read<float>(out), got_half = args.read<float>(halves);
  for (uint32_t k = 0; k < n; ++k) {
    float sum = 0;
    bool negative = false;
    for (uint32_t j = 0; j < 4; ++j) {
      sum += x[4 * k + j];
      negative |= x[4 * k + j] < 0;
    }
    EXPECT_EQ(got[k], negative ? -sum : sum) << "element " << k;
    for (uint32_t j = 0; j < 4; ++j)
      EXPECT_EQ(got_half[4 * k + j], half[4 * k + j] * 0.5f) << "lane " << j << " of " << k;
  }
}

TEST_P(DslReach, print_writes_each_invocations_values_to_standard_output) {
  auto module = traced(dsl::trace<print_values>("print_values", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const std::vector<float> x = {0.5f, -2.0f, 1e10f, 3.25f, 0.1f, -0.0f};
  const uint32_t n = static_cast<uint32_t>(x.size());
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(n, 7.0f), n);
  ::testing::internal::CaptureStdout();
  std::vector<cubecc::ir::Diagnostic> problems = launch(*module->kernels()[0], args, {1, 1, 1});
  std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
  std::vector<float> got = args.read<float>(out);
  for (uint32_t k = 0; k < n; ++k)
    EXPECT_EQ(got[k], 2 * x[k]) << "element " << k;
  if (GetParam() == "vulkan") {
    // NonSemantic.DebugPrintf: only a debug-printf layer prints it; lavapipe runs the kernel.
    EXPECT_EQ(printed, "");
    return;
  }
  std::vector<std::string> expected;
  for (uint32_t k = 0; k < n; ++k) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", static_cast<double>(x[k]));
    expected.push_back("i=" + std::to_string(k) + " x=" + value +
                       " negative=" + (x[k] < 0 ? "1" : "0") +
                       " wide=" + std::to_string(int64_t{k} - 3) + " {ok} 100%\n");
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(sorted_lines(printed), expected) << printed;
}

TEST_P(DslReach, print_around_barriers_prints_what_the_interpreter_prints) {
  auto module =
      traced(dsl::trace<print_in_barrier_loop>("print_in_barrier_loop", {.workgroup = {16, 1, 1}}));
  ASSERT_TRUE(module);
  const cubecc::ir::Kernel &kernel = *module->kernels()[0];
  // The reference: the interpreter's print callback.
  Args reference;
  size_t reference_out = reference.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(16), 16);
  std::string expected;
  cubecc::ir::LaunchConfig config;
  config.print = [&](std::string_view text) { expected += text; };
  std::vector<cubecc::ir::Diagnostic> problems =
      cubecc::ir::interpret(kernel, reference.args(), config);
  ASSERT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
  ASSERT_EQ(sorted_lines(expected).size(), 2u * (16 + 8)); // two rounds: 16 lines and 8 odd ones

  Args args;
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(16), 16);
  ::testing::internal::CaptureStdout();
  problems = launch(kernel, args, {1, 1, 1});
  std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
  EXPECT_EQ(args.read<uint32_t>(out), reference.read<uint32_t>(reference_out));
  if (GetParam() == "vulkan")
    EXPECT_EQ(printed, ""); // only a debug-printf layer prints
  else
    EXPECT_EQ(sorted_lines(printed), sorted_lines(expected)) << printed;
}

TEST_P(DslReach, inverse_trigonometric_hyperbolic_and_c99_functions_and_classifications) {
  auto module = traced(dsl::trace<more_math>("more_math", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -7.25f, 9.5f, 0.001f, -0.5f, 3.0f};
  while (x.size() < 64)
    x.push_back(static_cast<float>(x.size() % 19) * 0.5f - 4.5f);
  const uint32_t n = static_cast<uint32_t>(x.size());
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(4 * n, 7.0f), 4 * n);
  size_t flags = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(n, 9), n);
  run(*module->kernels()[0], args, 1);
  std::vector<float> got = args.read<float>(out);
  std::vector<uint32_t> got_flags = args.read<uint32_t>(flags);
  for (uint32_t k = 0; k < n; ++k) {
    double v = x[k], unit = static_cast<float>(x[k] * 0.1f);
    double want[3] = {std::atan2(v, 1.5) + std::hypot(v, 2.0) + std::tan(unit) + std::asin(unit) +
                          std::acos(unit) + std::atan(v),
                      std::sinh(unit) + std::cosh(unit) + std::asinh(v) +
                          std::acosh(std::fabs(v) + 1) + std::atanh(unit * 0.5),
                      std::expm1(unit) + std::log1p(std::fabs(v)) + std::trunc(v)};
    // Sums of six float results, each within a few ULP (docs/precision.md): a relative bound.
    for (int f = 0; f < 3; ++f)
      EXPECT_NEAR(got[4 * k + f], want[f], 1e-5 * (1 + std::fabs(want[f])))
          << "sum " << f << " at x = " << x[k];
    double r = std::log(v);
    uint32_t want_flags = (std::isnan(r) ? 1u : 0u) + (std::isinf(r) ? 2u : 0u);
    EXPECT_EQ(got_flags[k], want_flags) << "log(" << x[k] << ") = " << got[4 * k + 3];
  }
}

TEST_P(DslReach, vectors_from_lanes_a_lane_by_runtime_index_and_horizontal_operations) {
  auto module = traced(dsl::trace<vectors>("vectors", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 40;
  auto [x, pick] = vectors_and_picks(n);
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, 4 * n);
  args.tensor(cubecc::ir::Scalar::U32, pick, n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(5 * n, 7.0f), 5 * n);
  run(*module->kernels()[0], args, 1);
  std::vector<float> got = args.read<float>(out);
  for (uint32_t k = 0; k < n; ++k) {
    const float *v = &x[4 * k];
    float w[4] = {v[0], v[1], 10.0f, v[3]};
    float sum = ((w[0] + w[1]) + w[2]) + w[3];
    float lo = std::min(std::min(std::min(v[0], v[1]), v[2]), v[3]);
    float hi = std::max(std::max(std::max(v[0], v[1]), v[2]), v[3]);
    float p[4] = {v[0] * w[0], v[1] * w[1], v[2] * w[2], v[3] * w[3]};
    float dot = ((p[0] + p[1]) + p[2]) + p[3];
    EXPECT_EQ(got[5 * k], sum) << "hsum at " << k;
    EXPECT_EQ(got[5 * k + 1], lo) << "hmin at " << k;
    EXPECT_EQ(got[5 * k + 2], hi) << "hmax at " << k;
    EXPECT_EQ(got[5 * k + 3], dot) << "dot at " << k;
    EXPECT_EQ(got[5 * k + 4], v[pick[k] < 4 ? pick[k] : 0]) << "lane " << pick[k] << " at " << k;
  }
}

TEST_P(DslReach, bit_counting_mulhi_and_saturating_arithmetic) {
  auto module = traced(dsl::trace<bit_ops>("bit_ops", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> a = {0, 1, -1, kMin, kMax, 0x00f0f000, -12345, 1 << 30, 96, 7};
  std::vector<int32_t> b = {0, kMax, kMin, -1, 1, 3, 99999, 1 << 30, -96, kMin};
  while (a.size() < 100) {
    uint32_t k = static_cast<uint32_t>(a.size());
    a.push_back(static_cast<int32_t>(k * 2654435761u));
    b.push_back(static_cast<int32_t>(k * 40503u) - 2000000);
  }
  const uint32_t n = static_cast<uint32_t>(a.size());
  std::vector<uint8_t> u(n);
  for (uint32_t k = 0; k < n; ++k)
    u[k] = static_cast<uint8_t>(k * 37);
  Args args;
  args.tensor(cubecc::ir::Scalar::I32, a, n);
  args.tensor(cubecc::ir::Scalar::I32, b, n);
  size_t out = args.tensor(cubecc::ir::Scalar::I32, std::vector<int32_t>(8 * n, 7), 8 * n);
  args.tensor(cubecc::ir::Scalar::U8, u, n);
  size_t uout = args.tensor(cubecc::ir::Scalar::U8, std::vector<uint8_t>(2 * n, 7), 2 * n);
  run(*module->kernels()[0], args, (n + 63) / 64);
  std::vector<int32_t> got = args.read<int32_t>(out);
  std::vector<uint8_t> got_u = args.read<uint8_t>(uout);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t x = static_cast<uint32_t>(a[k]);
    uint32_t reversed = 0;
    for (int j = 0; j < 32; ++j)
      reversed |= ((x >> j) & 1u) << (31 - j);
    int64_t sum = int64_t{a[k]} + b[k], diff = int64_t{a[k]} - b[k];
    int32_t want[8] = {std::popcount(x),
                       std::countl_zero(x),
                       std::countr_zero(x),
                       x == 0 ? 0 : std::countr_zero(x) + 1,
                       static_cast<int32_t>(reversed),
                       static_cast<int32_t>((int64_t{a[k]} * b[k]) >> 32),
                       static_cast<int32_t>(std::clamp<int64_t>(sum, kMin, kMax)),
                       static_cast<int32_t>(std::clamp<int64_t>(diff, kMin, kMax))};
    static const char *const kOps[] = {"popcount",   "clz",   "ctz",     "ffs",
                                       "bitreverse", "mulhi", "add_sat", "sub_sat"};
    for (int f = 0; f < 8; ++f)
      EXPECT_EQ(got[8 * k + f], want[f]) << kOps[f] << "(" << a[k] << ", " << b[k] << ")";
    int v = u[k], pop = std::popcount(u[k]), lz = std::countl_zero(u[k]);
    EXPECT_EQ(got_u[2 * k], std::min(2 * v, 255)) << "add_sat(" << v << ", " << v << ")";
    EXPECT_EQ(got_u[2 * k + 1], std::max(pop - lz, 0)) << "sub_sat at u = " << v;
  }
}

TEST_P(DslReach, subgroup_products_and_shuffles_from_outside_the_subgroup) {
  auto module = traced(dsl::trace<subgroup_reach>("subgroup_reach", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 128;
  std::vector<float> x(n);
  for (uint32_t k = 0; k < n; ++k) // +-1, +-2 and +-0.5: every partial product is exact
    x[k] = (k % 3 == 0 ? -1.0f : 1.0f) * (k % 8 == 3 ? 2.0f : k % 8 == 6 ? 0.5f : 1.0f);
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(3 * n, 7.0f), 3 * n);
  size_t where = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(2 * n, 0), 2 * n);
  run(*module->kernels()[0], args, n / 64);
  std::vector<float> got = args.read<float>(out);
  std::vector<uint32_t> lanes = args.read<uint32_t>(where);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t lane = lanes[2 * k], size = lanes[2 * k + 1];
    ASSERT_TRUE(size > 0 && 64 % size == 0 && lane == k % size)
        << "lane " << lane << " of a subgroup of " << size << " at invocation " << k;
    float product = 1;
    for (uint32_t j = k - lane; j <= k; ++j)
      product *= x[j];
    EXPECT_EQ(got[3 * k], product) << "inclusive product at " << k;
    EXPECT_EQ(got[3 * k + 1], lane == 0 ? x[k] : x[k - 1]) << "shuffle_up by 1 at " << k;
    EXPECT_EQ(got[3 * k + 2], x[k]) << "shuffle from lane size + 3 at " << k;
  }
}

TEST_P(DslReach, float_atomic_min_max_and_atomic_load_store) {
  auto module = traced(dsl::trace<atomics_reach>("atomics_reach", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 100;
  std::vector<float> x(n);
  for (uint32_t k = 0; k < n; ++k)
    x[k] = static_cast<float>((k * 37) % 101) * 0.75f - 30.0f;
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, n);
  size_t extremes = args.tensor(cubecc::ir::Scalar::F32,
                                std::vector<float>{std::numeric_limits<float>::infinity(),
                                                   -std::numeric_limits<float>::infinity()},
                                2);
  args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(n, 0), n);
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(n, 0), n);
  run(*module->kernels()[0], args, (n + 63) / 64);
  std::vector<float> got = args.read<float>(extremes);
  EXPECT_EQ(got[0], *std::min_element(x.begin(), x.end()));
  EXPECT_EQ(got[1], *std::max_element(x.begin(), x.end()));
  std::vector<uint32_t> loaded = args.read<uint32_t>(out);
  for (uint32_t k = 0; k < n; ++k)
    EXPECT_EQ(loaded[k], k * 3 + 1) << "element " << k;
}

TEST_P(DslReach, vector_atomics_act_lane_by_lane_and_float_atomic_sub_subtracts) {
  auto module = traced(dsl::trace<vector_atomics>("vector_atomics", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 100; // vectors
  std::vector<float> x(4 * n);
  for (uint32_t k = 0; k < 4 * n; ++k) // multiples of 1/4: every partial sum is exact
    x[k] = static_cast<float>((k * 37) % 41) * 0.25f - 5.0f;
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, 4 * n);
  size_t sums = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(8, 1.0f), 8);
  size_t extremes = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(4, -100.0f), 4);
  args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(4 * n), 4 * n);
  size_t loaded = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(4 * n), 4 * n);
  run(*module->kernels()[0], args, (n + 63) / 64);
  std::vector<float> got_sums = args.read<float>(sums), got_max = args.read<float>(extremes),
                     got_loaded = args.read<float>(loaded);
  for (uint32_t l = 0; l < 4; ++l) {
    float sum = 0, max = -100.0f;
    for (uint32_t k = 0; k < n; ++k) {
      sum += x[4 * k + l];
      max = std::max(max, x[4 * k + l]);
    }
    EXPECT_EQ(got_sums[l], 1.0f + sum) << "lane " << l;
    EXPECT_EQ(got_sums[4 + l], 1.0f - sum) << "lane " << l;
    EXPECT_EQ(got_max[l], max) << "lane " << l;
  }
  for (uint32_t k = 0; k < 4 * n; ++k)
    EXPECT_EQ(got_loaded[k], 2.0f * x[k]) << "element " << k;
}

TEST_P(DslReach, narrow_atomics_on_bytes_shorts_f16_and_bf16) {
  auto module = traced(dsl::trace<narrow_atomics>("narrow_atomics", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 300;
  std::vector<uint32_t> x(n);
  for (uint32_t k = 0; k < n; ++k)
    x[k] = (k * 2654435761u) >> 21; // 0 .. 2047
  Args args;
  args.tensor(cubecc::ir::Scalar::U32, x, n);
  size_t bytes = args.tensor(cubecc::ir::Scalar::U8, std::vector<uint8_t>{1, 2, 3, 4}, 4);
  size_t shorts =
      args.tensor(cubecc::ir::Scalar::I16, std::vector<int16_t>{INT16_MIN, INT16_MIN}, 2);
  size_t halves = args.tensor(cubecc::ir::Scalar::F16, std::vector<uint16_t>{0, 0x3c00}, 2);
  size_t brains = args.tensor(cubecc::ir::Scalar::BF16, std::vector<uint16_t>{0x4316}, 1);
  std::vector<cubecc::ir::Diagnostic> problems =
      launch(*module->kernels()[0], args, {(n + 63) / 64, 1, 1});
  if (GetParam() == "vulkan") { // no 8- or 16-bit atomics in Vulkan: refused, by name
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(cubecc::ir::to_string(problems).find("atomics on u8"), std::string::npos)
        << cubecc::ir::to_string(problems);
    return;
  }
  ASSERT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
  uint8_t want_bytes[4] = {1, 2, 3, 4};
  int16_t want_shorts[2] = {INT16_MIN, INT16_MIN};
  for (uint32_t k = 0; k < n; ++k) {
    want_bytes[k % 4] = static_cast<uint8_t>(want_bytes[k % 4] + (x[k] & 0xff));
    want_shorts[k % 2] = std::max<int16_t>(want_shorts[k % 2], static_cast<int16_t>(x[k] - 500));
  }
  EXPECT_EQ(args.read<uint8_t>(bytes), std::vector<uint8_t>(want_bytes, want_bytes + 4));
  EXPECT_EQ(args.read<int16_t>(shorts), std::vector<int16_t>(want_shorts, want_shorts + 2));
  // 150 adds of 1 to 0 and to 1 (f16: 150 = 0x58b0, 151 = 0x58b8); 150 - 300 in bf16 (0x4316 is
  // 150, 0xc316 is -150; every partial result is an integer below 2^8, exact in bf16).
  EXPECT_EQ(args.read<uint16_t>(halves), (std::vector<uint16_t>{0x58b0, 0x58b8}));
  EXPECT_EQ(args.read<uint16_t>(brains), std::vector<uint16_t>{0xc316});
}

TEST_P(DslReach, integer_and_mixed_fp8_matrices_multiply_as_the_host_does) {
  auto module = traced(dsl::trace<int8_and_mixed_fp8_products>("int8_and_mixed_fp8_products",
                                                               {.workgroup = {32, 1, 1}}));
  ASSERT_TRUE(module);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<int8_t> a(16 * 32);
  std::vector<uint8_t> b(32 * 8), fa(16 * 32), fb(32 * 8);
  std::vector<int32_t> c(16 * 8);
  for (auto &x : a)
    x = static_cast<int8_t>(byte(rng));
  for (auto &x : b)
    x = static_cast<uint8_t>(byte(rng));
  for (size_t i = 0; i < c.size(); ++i) // near both ends, so that some sums wrap
    c[i] = i % 2 ? INT32_MAX - byte(rng) * 1000 : INT32_MIN + byte(rng) * 1000;
  // Finite fp8 values of every exponent (e4m3 0x7F/0xFF are NaN, e5m2 0x7C.. are inf/NaN).
  for (auto &x : fa)
    x = static_cast<uint8_t>(byte(rng) & 0xF7);
  for (auto &x : fb)
    x = static_cast<uint8_t>(byte(rng) & 0xBB);
  Args args;
  args.tensor(cubecc::ir::Scalar::I8, a, 16 * 32);
  args.tensor(cubecc::ir::Scalar::U8, b, 32 * 8);
  args.tensor(cubecc::ir::Scalar::I32, c, 16 * 8);
  size_t di = args.tensor(cubecc::ir::Scalar::I32, std::vector<int32_t>(16 * 8), 16 * 8);
  args.tensor(cubecc::ir::Scalar::E4M3, fa, 16 * 32);
  args.tensor(cubecc::ir::Scalar::E5M2, fb, 32 * 8);
  size_t fi = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(16 * 8), 16 * 8);
  if (!matrix_launch_ran(launch(*module->kernels()[0], args, {1, 1, 1})))
    return;
  std::vector<int32_t> got = args.read<int32_t>(di);
  std::vector<float> got_f = args.read<float>(fi);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      int64_t sum = c[i * 8 + j];
      double fsum = 0.5; // the interpreter's order: C, then k = 0, 1, ... in double
      for (int k = 0; k < 32; ++k) {
        sum += int64_t{a[i * 32 + k]} * b[k * 8 + j];
        fsum += dsl::e4m3{fa[i * 32 + k]}.value() * dsl::e5m2{fb[j * 32 + k]}.value();
      }
      EXPECT_EQ(got[i * 8 + j], static_cast<int32_t>(static_cast<uint32_t>(sum)))
          << "D[" << i << "][" << j << "]";
      EXPECT_EQ(got_f[i * 8 + j], static_cast<float>(fsum)) << "F[" << i << "][" << j << "]";
    }
}

/// `x` rounded to 11 significant bits, halfway cases away from zero (std::round): tf32, for the
/// normal floats the test uses; written apart from cubecc's bit-level rounding.
double host_tf32(float x) {
  int exponent = 0;
  double fraction = std::frexp(static_cast<double>(x), &exponent); // [0.5, 1)
  return std::ldexp(std::round(std::ldexp(fraction, 11)), exponent - 11);
}

TEST_P(DslReach, float_matrices_multiply_as_tf32) {
  auto module = traced(dsl::trace<tf32_products>("tf32_products", {.workgroup = {32, 1, 1}}));
  ASSERT_TRUE(module);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> a(16 * 8), b(8 * 16);
  for (auto &x : a)
    x = value(rng);
  for (auto &x : b)
    x = value(rng);
  // Exact halfway cases: ties away from zero, not to even (1 + 2^-11 -> 1 + 2^-10).
  a[0] = 1.0f + std::ldexp(1.0f, -11);
  a[9] = -(1.0f + std::ldexp(1.0f, -11));
  a[18] = 1.0f + 3 * std::ldexp(1.0f, -11);
  b[0] = 1.5f + std::ldexp(1.0f, -11);
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, a, 16 * 8);
  args.tensor(cubecc::ir::Scalar::F32, b, 8 * 16);
  size_t d = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(16 * 16), 16 * 16);
  size_t e = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(16 * 8), 16 * 8);
  if (!matrix_launch_ran(launch(*module->kernels()[0], args, {1, 1, 1})))
    return;
  EXPECT_EQ(host_tf32(a[0]), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(host_tf32(a[9]), -(1.0 + std::ldexp(1.0, -10)));
  // The interpreter's order (C, then k = 0, 1, ... in double, rounded once) everywhere but on a
  // GPU, whose tensor cores sum in their own order: there, within a few f32 roundings.
  const bool exact = GetParam() != "cuda";
  auto check = [&](const std::vector<float> &got, uint32_t n, double c, auto b_at,
                   const char *what) {
    for (uint32_t i = 0; i < 16; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        double sum = c, magnitude = std::abs(c);
        for (uint32_t k = 0; k < 8; ++k) {
          double term = host_tf32(a[i * 8 + k]) * host_tf32(b[b_at(k, j)]);
          sum += term;
          magnitude += std::abs(term);
        }
        if (exact)
          EXPECT_EQ(got[i * n + j], static_cast<float>(sum))
              << what << "[" << i << "][" << j << "]";
        else
          EXPECT_NEAR(got[i * n + j], sum, 8 * std::ldexp(magnitude, -24))
              << what << "[" << i << "][" << j << "]";
      }
  };
  check(
      args.read<float>(d), 16, 0.25, [](uint32_t k, uint32_t j) { return k * 16 + j; }, "D");
  check(
      args.read<float>(e), 8, -1.0, [](uint32_t k, uint32_t j) { return j * 8 + k; }, "E");
}

TEST_P(DslReach, a_subgroup_barrier_orders_the_subgroups_shared_memory) {
  auto module =
      traced(dsl::trace<subgroup_neighbours>("subgroup_neighbours", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  EXPECT_NE(cubecc::ir::to_string(*module).find("subgroup.barrier"), std::string::npos);
  Args args;
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(64), 64);
  size_t sizes = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(64), 64);
  run(*module->kernels()[0], args, 1);
  std::vector<uint32_t> got = args.read<uint32_t>(out);
  const uint32_t size = args.read<uint32_t>(sizes)[0];
  ASSERT_TRUE(size >= 1 && 64 % size == 0) << size;
  for (uint32_t i = 0; i < 64; ++i) {
    uint32_t neighbour = i / size * size + (i % size + 1) % size;
    EXPECT_EQ(got[i], neighbour * 3 + 1) << "invocation " << i << ", subgroups of " << size;
  }
}

TEST_P(DslReach, global_index_and_a_workgroup_uniform_load_deciding_a_barrier) {
  auto module = traced(
      dsl::trace<topology_and_uniform_load>("topology_and_uniform_load", {.workgroup = {4, 2, 2}}));
  ASSERT_TRUE(module);
  const uint32_t n = 3 * 2 * 16; // a 3 x 2 grid of 16-invocation workgroups
  Args args;
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(n), n);
  size_t decided = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(n), n);
  std::vector<cubecc::ir::Diagnostic> problems = launch(*module->kernels()[0], args, {3, 2, 1});
  ASSERT_TRUE(problems.empty()) << cubecc::ir::to_string(problems);
  std::vector<uint32_t> got = args.read<uint32_t>(out), got_decided = args.read<uint32_t>(decided);
  for (uint32_t g = 0; g < n; ++g) {
    EXPECT_EQ(got[g], g + 1) << "global_index " << g;
    EXPECT_EQ(got_decided[g], g / 16 % 3 + 7) << "the uniform load at " << g;
  }
}

TEST_P(DslReach, switch_grid_stride_loop_and_workgroup_primitives) {
  auto module = traced(
      dsl::trace<control_and_primitives>("control_and_primitives", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 128, m = 1000; // two workgroups; `doubled` is longer than the grid
  std::vector<uint32_t> x(n);
  for (uint32_t k = 0; k < n; ++k)
    x[k] = (k * 2654435761u) >> 20;
  Args args;
  args.tensor(cubecc::ir::Scalar::U32, x, n);
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(10 * n, 7), 10 * n);
  size_t doubled = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(m, 7), m);
  run(*module->kernels()[0], args, n / 64);
  std::vector<uint32_t> got = args.read<uint32_t>(out);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t base = k / 64 * 64, lane = k % 64;
    uint32_t sum = 0, prefix = 0, before = 0, running_max = 0, lowest = UINT32_MAX, any = 0,
             prefix_any = 0;
    for (uint32_t j = base; j < base + 64; ++j) {
      sum += x[j];
      any |= x[j];
      lowest = std::min(lowest, x[j]);
      if (j <= k) {
        prefix += x[j];
        prefix_any |= x[j];
      }
      if (j < k) {
        running_max = std::max(running_max, x[j]);
        before += x[j];
      }
    }
    uint32_t r = x[k] % 8, kind = r == 0 ? 10 : r == 2 || r == 5 || r == 7 ? 20 : 30;
    EXPECT_EQ(got[10 * k], kind) << "switch_ at " << k;
    EXPECT_EQ(got[10 * k + 1], sum) << "reduce at " << k;
    EXPECT_EQ(got[10 * k + 2], prefix) << "inclusive_scan at " << k;
    EXPECT_EQ(got[10 * k + 3], lane == 0 ? 0u : running_max) << "exclusive_scan at " << k;
    EXPECT_EQ(got[10 * k + 4], x[base + 5]) << "broadcast at " << k;
    EXPECT_EQ(got[10 * k + 5], lowest) << "reduce(minimum) at " << k;
    EXPECT_EQ(got[10 * k + 6], any) << "reduce(a | b) at " << k;
    EXPECT_EQ(got[10 * k + 7], prefix_any) << "inclusive_scan(a | b) at " << k;
    EXPECT_EQ(got[10 * k + 8], before) << "exclusive_scan(plus) at " << k;
    EXPECT_EQ(got[10 * k + 9], 6 * sum) << "reduce in a loop at " << k;
  }
  std::vector<uint32_t> got_doubled = args.read<uint32_t>(doubled);
  for (uint32_t k = 0; k < m; ++k)
    EXPECT_EQ(got_doubled[k], 2 * k) << "grid_stride_for at " << k;
}

TEST_P(DslReach, storage_floats_quantize_and_convert_back_as_the_host_does) {
  auto module = traced(dsl::trace<storage_floats>("storage_floats", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 64;
  std::vector<float> x(n);
  for (uint32_t k = 0; k < n; ++k) // magnitudes from 2^-12 to about 2^10, both signs, and 0
    x[k] = k == 0 ? 0.0f : (k % 2 ? 1.0f : -1.0f) * std::ldexp(1.0f + 0.07f * k, int(k % 23) - 12);
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, n);
  size_t q8 = args.tensor(cubecc::ir::Scalar::E4M3, std::vector<uint8_t>(n), n);
  size_t q5 = args.tensor(cubecc::ir::Scalar::E5M2, std::vector<uint8_t>(n), n);
  size_t q4 = args.tensor(cubecc::ir::Scalar::E2M1, std::vector<uint8_t>(n), n);
  size_t scale = args.tensor(cubecc::ir::Scalar::UE8M0, std::vector<uint8_t>(n), n);
  size_t back = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(n), n);
  size_t wide = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(n), n);
  const dsl::e4m3 bias = dsl::e4m3::from(-0.375);
  args.scalar(bias.bits);
  run(*module->kernels()[0], args, 1);
  std::vector<uint8_t> got8 = args.read<uint8_t>(q8), got5 = args.read<uint8_t>(q5),
                       got4 = args.read<uint8_t>(q4), got_scale = args.read<uint8_t>(scale);
  std::vector<float> got_back = args.read<float>(back), got_wide = args.read<float>(wide);
  for (uint32_t k = 0; k < n; ++k) {
    dsl::e4m3 e = dsl::e4m3::from(x[k]);
    dsl::ue8m0 s = dsl::ue8m0::from(x[k]);
    EXPECT_EQ(got8[k], e.bits) << "e4m3 of " << x[k];
    EXPECT_EQ(got5[k], dsl::e5m2::from(x[k] * 100.0f).bits) << "e5m2 of 100 * " << x[k];
    EXPECT_EQ(got_scale[k], s.bits) << "ue8m0 of " << x[k];
    EXPECT_EQ(got4[k], dsl::e2m1::from(x[k] / static_cast<float>(s.value())).bits)
        << "e2m1 of " << x[k];
    EXPECT_EQ(got_back[k], static_cast<float>(e.value()) + static_cast<float>(bias.value()))
        << "e4m3 back to f32, plus an e4m3 parameter, at " << k;
    EXPECT_EQ(got_wide[k], static_cast<float>(e.value())) << "4-lane e4m3 load at " << k;
  }
  // The host conversions are the documented ones: 1000 saturates in e4m3, rounds in ue8m0.
  EXPECT_EQ(dsl::e4m3::from(1000.0).value(), 448.0);
  EXPECT_EQ(dsl::ue8m0::from(1000.0).value(), 1024.0);
}

TEST_P(DslReach, return_and_break_out_of_nested_loops) {
  auto module = traced(dsl::trace<early_exits>("early_exits", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 60; // 64 invocations: the last four return_ at once
  std::vector<uint32_t> grid(64);
  for (uint32_t p = 0; p < 64; ++p)
    grid[p] = p * 37 % 48; // 0..47, each twice or once; 48..63 nowhere
  Args args;
  args.tensor(cubecc::ir::Scalar::U32, grid, 64);
  size_t out =
      args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(2 * n, 0xeeeeeeee), 2 * n);
  run(*module->kernels()[0], args, 1);
  std::vector<uint32_t> got = args.read<uint32_t>(out);
  for (uint32_t i = 0; i < n; ++i) {
    if (i % 5 == 4) {
      EXPECT_EQ(got[2 * i], 0xeeeeeeeeu) << "returned at " << i;
      EXPECT_EQ(got[2 * i + 1], 0xeeeeeeeeu) << "returned at " << i;
      continue;
    }
    uint32_t first = 0xffffffff;
    for (uint32_t p = 0; p < 64 && first == 0xffffffff; ++p)
      if (grid[p] == i)
        first = p;
    uint32_t k = 0;
    while (k * k <= i)
      ++k;
    EXPECT_EQ(got[2 * i], first) << "break_(2) at " << i;
    EXPECT_EQ(got[2 * i + 1], k) << "return_ from a loop at " << i;
  }
}

TEST_P(DslReach, logical_and_or_short_circuit) {
  auto module = traced(dsl::trace<short_circuit>("short_circuit", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 40;
  std::vector<float> x(n);
  for (uint32_t k = 0; k < n; ++k)
    x[k] = static_cast<float>(k % 4) / 4.0f; // 0, 0.25, 0.5, 0.75
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, n);
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(64), 64);
  run(*module->kernels()[0], args, 1);
  std::vector<uint32_t> got = args.read<uint32_t>(out);
  for (uint32_t i = 0; i < 64; ++i) {
    uint32_t want = (i < n && x[i] > 0.5f ? 1 : 0) + (i >= n || x[i] < 0.25f ? 2 : 0) +
                    (i % 2 == 0 && i > 10 ? 4 : 0);
    EXPECT_EQ(got[i], want) << "at " << i;
  }
}

TEST_P(DslReach, views_as_another_element_type_and_slices_of_runtime_length) {
  auto module = traced(dsl::trace<views_and_slices>("views", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  std::vector<float> halves(16);
  for (uint32_t k = 0; k < 16; ++k)
    halves[k] = 0.5f * static_cast<float>(k) - 3.0f;
  std::vector<uint8_t> raw(64);
  std::memcpy(raw.data(), halves.data(), 64);
  const uint32_t start = 5, length = 40;
  Args args;
  args.tensor(cubecc::ir::Scalar::U8, raw, 64);
  size_t words = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(16), 16);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(64, -1.0f), 64);
  args.scalar(start);
  args.scalar(length);
  run(*module->kernels()[0], args, 1);
  std::vector<uint32_t> got_words = args.read<uint32_t>(words);
  for (uint32_t k = 0; k < 16; ++k)
    EXPECT_EQ(got_words[k], std::bit_cast<uint32_t>(halves[k] * 2.0f)) << "word " << k;
  std::vector<float> got = args.read<float>(out);
  for (uint32_t k = 0; k < 64; ++k) {
    float want = -1.0f;
    if (k >= start && k < start + length)
      want = static_cast<float>(dsl::e4m3{raw[k - start]}.value());
    else if (k == start + length + 1 || k == start + length + 2)
      want = 7.0f;
    EXPECT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want)) << "out " << k;
  }
}

TEST_P(DslReach, a_view_of_a_slice_reads_and_writes_from_the_slices_start) {
  auto module = traced(dsl::trace<view_of_a_slice>("view_of_slice", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  std::vector<uint8_t> raw(64);
  for (uint32_t k = 0; k < 64; ++k)
    raw[k] = static_cast<uint8_t>(k * 7 + 1);
  const uint32_t start = 8;
  Args args;
  args.tensor(cubecc::ir::Scalar::U8, raw, 64);
  size_t shifted = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(16, 0xdeadu), 16);
  args.scalar(start);
  run(*module->kernels()[0], args, 1);
  std::vector<uint32_t> got = args.read<uint32_t>(shifted);
  for (uint32_t k = 0; k < 14; ++k) {
    uint32_t want;
    std::memcpy(&want, raw.data() + start + 4 * k, 4);
    EXPECT_EQ(got[k], want) << "shifted " << k;
  }
  EXPECT_EQ(got[14], 0xdeadu); // past the view's 14 words
  uint32_t first;
  std::memcpy(&first, raw.data() + start, 4);
  EXPECT_EQ(got[15], std::bit_cast<uint32_t>(std::bit_cast<float>(first) * 2.0f));
}

TEST_P(DslReach, conveniences_a_lane_set_by_runtime_index_and_tensor_coordinates) {
  auto module = traced(dsl::trace<conveniences>("conveniences", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  const uint32_t n = 40;
  auto [x, pick] = vectors_and_picks(n);
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, x, 4 * n);
  args.tensor(cubecc::ir::Scalar::U32, pick, n);
  size_t out = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(8 * n), 8 * n);
  size_t lanes = args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(4 * n), 4 * n);
  args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(15), {3, 5}, {5, 1});
  size_t coords = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(30), 30);
  run(*module->kernels()[0], args, 1);
  std::vector<float> got = args.read<float>(out), got_lanes = args.read<float>(lanes);
  // Division, pow, sqrt and rsqrt are within a few ULP on every device (docs/precision.md).
  auto near = [](float got, double want) {
    return std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-30;
  };
  for (uint32_t k = 0; k < n; ++k) {
    const float *v = &x[4 * k];
    double dot = ((double(v[0] * v[0]) + v[1] * v[1]) + v[2] * v[2]) + v[3] * v[3];
    double want[8] = {1.0 / v[0],
                      v[0] * (180.0 / std::numbers::pi),
                      v[0] * (std::numbers::pi / 180.0),
                      1.0 / std::hypot(double(v[0]), double(v[1])),
                      std::pow(double(v[0]), double(pick[k])),
                      std::sqrt(dot),
                      v[1] / std::sqrt(dot),
                      double(v[1]) * v[1] * v[1]};
    for (int j = 0; j < 8; ++j)
      EXPECT_TRUE(near(got[8 * k + j], want[j]))
          << "result " << j << " at " << k << ": " << got[8 * k + j] << ", want " << want[j];
    for (uint32_t l = 0; l < 4; ++l)
      EXPECT_EQ(got_lanes[4 * k + l], l == pick[k] ? 100.0f : v[l]) << "lane " << l << " at " << k;
  }
  std::vector<uint32_t> got_coords = args.read<uint32_t>(coords);
  for (uint32_t i = 0; i < 15; ++i) {
    EXPECT_EQ(got_coords[2 * i], i / 5) << "row of " << i;
    EXPECT_EQ(got_coords[2 * i + 1], i % 5) << "column of " << i;
  }
}

TEST_P(DslReach, tensor_shape_and_stride_by_a_runtime_dimension) {
  auto module = traced(dsl::trace<runtime_dims>("runtime_dims", {.workgroup = {64, 1, 1}}));
  ASSERT_TRUE(module);
  // t: a 2 x 3 x 4 view with padded strides (the buffer is large enough for them).
  const uint32_t dims = 5; // two past the rank
  Args args;
  args.tensor(cubecc::ir::Scalar::F32, std::vector<float>(100), {2, 3, 4}, {40, 10, 1});
  size_t out = args.tensor(cubecc::ir::Scalar::U32, std::vector<uint32_t>(2 * dims + 2, 0xeeeeeeee),
                           2 * dims + 2);
  run(*module->kernels()[0], args, 1);
  std::vector<uint32_t> got = args.read<uint32_t>(out);
  // size() is the shape's 24 elements; buffer_size() the 100 of the padded buffer.
  EXPECT_EQ(got, (std::vector<uint32_t>{2, 40, 3, 10, 4, 1, 1, 0, 1, 0, 24, 100}));
}

INSTANTIATE_TEST_SUITE_P(Devices, DslReach,
                         ::testing::Values("interp", "vulkan", "cpu", "cuda", "hip"),
                         [](const auto &info) { return info.param; });

} // namespace
