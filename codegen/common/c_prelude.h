//===- c_prelude.h - The support code every CUDA/HIP kernel cubecc writes starts with ---------===//
//
// Types named like the IR's (i32, f32, ...), bit casts, f16/bf16 conversions through the vendor
// headers (registers hold f16/bf16 values as f32, exactly; see c_emitter.cpp), and the warp
// collectives over the active lanes. Kept as C++ text: it becomes part of each kernel's source.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

namespace cubecc::codegen {

/// The part shared by both dialects; `CUBECC_WARP`, `cubecc_mask`, `cubecc_active()`,
/// `cubecc_shfl_raw32/64`, `cubecc_ballot`, `cubecc_all`, `cubecc_any` and the f16/bf16 storage
/// types come from the dialect's part, which precedes it.
inline constexpr const char *kCPreludeCommon = R"CUBECC(
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;

template <class T, int N> struct cubecc_vec { T v[N]; };


template <class A, class B> struct cubecc_same {
  static constexpr bool value = false;
};
template <class A> struct cubecc_same<A, A> {
  static constexpr bool value = true;
};

// f16 and bf16 live in f32 registers. Conversions keep a NaN's sign and payload bits (loads,
// stores and bit casts must not change them); other values convert exactly or round to
// nearest even.
__device__ inline f32 cubecc_f16_to_f32(cubecc_f16_storage h) {
  u32 b = cubecc_f16_bits(h);
  if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0u)
    return __uint_as_float(((b & 0x8000u) << 16) | 0x7f800000u | ((b & 0x3ffu) << 13));
  return cubecc_f16_to_f32_rounded(h);
}
__device__ inline cubecc_f16_storage cubecc_f32_to_f16(f32 x) {
  if (x != x) {
    u32 b = __float_as_uint(x), payload = (b >> 13) & 0x3ffu;
    return cubecc_f16_from_bits(
        (u16)(((b >> 16) & 0x8000u) | 0x7c00u | (payload != 0u ? payload : 0x200u)));
  }
  return cubecc_f32_to_f16_rounded(x);
}
__device__ inline f32 cubecc_bf16_to_f32(cubecc_bf16_storage h) {
  return __uint_as_float((u32)cubecc_bf16_bits(h) << 16);
}
__device__ inline cubecc_bf16_storage cubecc_f32_to_bf16(f32 x) {
  if (x != x) {
    u32 b = __float_as_uint(x);
    return cubecc_bf16_from_bits((u16)((b >> 16) | ((b & 0x007f0000u) != 0u ? 0u : 0x40u)));
  }
  return cubecc_f32_to_bf16_rounded(x);
}
// f16 and bf16 live in f32 registers; these round an f32 once to their precision.
__device__ inline f32 cubecc_round_f16(f32 x) { return cubecc_f16_to_f32(cubecc_f32_to_f16(x)); }
__device__ inline f32 cubecc_round_bf16(f32 x) { return cubecc_bf16_to_f32(cubecc_f32_to_bf16(x)); }
// An f64 rounded to f32 toward zero with the last bit set when inexact (round to odd): rounding
// that to f16 or bf16 is the single rounding of the f64 value.
__device__ inline f32 cubecc_f64_to_f32_odd(f64 x) {
  f32 r = (f32)x;
  if (r != r || (f64)r == x || r - r != 0.0f)
    return r;
  u32 bits = __float_as_uint(r);
  if (((f64)r < 0 ? -(f64)r : (f64)r) > (x < 0 ? -x : x))
    bits -= 1;
  return __uint_as_float(bits | 1u);
}

// atomic.min and atomic.max on floats: a compare-and-swap loop on the bits, with fmin/fmax (the
// non-atomic min and max); returns the old value.
template <bool kMax> __device__ inline f32 cubecc_atomic_min_max(f32 *p, f32 v) {
  u32 *bits = (u32 *)p;
  u32 old = *(volatile u32 *)bits, seen;
  do {
    seen = old;
    f32 next = kMax ? fmaxf(__uint_as_float(seen), v) : fminf(__uint_as_float(seen), v);
    if (__float_as_uint(next) == seen)
      break;
    old = atomicCAS(bits, seen, __float_as_uint(next));
  } while (old != seen);
  return __uint_as_float(old);
}
template <bool kMax> __device__ inline f64 cubecc_atomic_min_max(f64 *p, f64 v) {
  unsigned long long *bits = (unsigned long long *)p;
  unsigned long long old = *(volatile unsigned long long *)bits, seen;
  do {
    seen = old;
    f64 next = kMax ? fmax(__longlong_as_double((i64)seen), v)
                    : fmin(__longlong_as_double((i64)seen), v);
    if ((unsigned long long)__double_as_longlong(next) == seen)
      break;
    old = atomicCAS(bits, seen, (unsigned long long)__double_as_longlong(next));
  } while (old != seen);
  return __longlong_as_double((i64)old);
}

// Warp collectives over the lanes active here (the IR's active set).
template <class T> __device__ inline T cubecc_shfl(cubecc_mask m, T v, u32 lane) {
  if constexpr (sizeof(T) == 8) {
    u64 b;
    if constexpr (cubecc_same<T, f64>::value)
      b = (u64)__double_as_longlong(v);
    else
      b = (u64)v;
    b = cubecc_shfl_raw64(m, b, lane);
    if constexpr (cubecc_same<T, f64>::value)
      return __longlong_as_double((i64)b);
    else
      return (T)b;
  } else {
    u32 b;
    if constexpr (cubecc_same<T, f32>::value)
      b = __float_as_uint(v);
    else
      b = (u32)v;
    b = cubecc_shfl_raw32(m, b, lane);
    if constexpr (cubecc_same<T, f32>::value)
      return __uint_as_float(b);
    else if constexpr (cubecc_same<T, bool>::value)
      return b != 0u;
    else
      return (T)b;
  }
}
__device__ inline bool cubecc_lane_active(cubecc_mask m, u32 lane) {
  return lane < CUBECC_WARP && ((m >> lane) & 1) != 0;
}
// Butterfly over the warp: a partner outside the active set contributes the identity, so every
// active lane ends with the combination over the active lanes.
template <class T, class F>
__device__ inline T cubecc_reduce(cubecc_mask m, T v, T identity, F f, u32 lane) {
  for (u32 k = 1; k < CUBECC_WARP; k <<= 1) {
    T other = cubecc_shfl(m, v, lane ^ k);
    v = f(v, cubecc_lane_active(m, lane ^ k) ? other : identity);
  }
  return v;
}
// Scans over the active lanes at or below (inclusive) or below (exclusive) this lane.
template <class T, class F>
__device__ inline T cubecc_scan(cubecc_mask m, T v, T identity, F f, u32 lane, bool inclusive) {
  T acc = identity;
  for (u32 j = 0; j < CUBECC_WARP; ++j) {
    T other = cubecc_shfl(m, v, j);
    if (cubecc_lane_active(m, j) && (j < lane || (inclusive && j == lane)))
      acc = f(acc, other);
  }
  return acc;
}
)CUBECC";

inline constexpr const char *kCPreludeCuda = R"CUBECC(
#define CUBECC_WARP 32u
typedef unsigned int cubecc_mask;
__device__ inline cubecc_mask cubecc_active() { return __activemask(); }
__device__ inline unsigned int cubecc_shfl_raw32(cubecc_mask m, unsigned int v, unsigned int l) {
  return __shfl_sync(m, v, l);
}
__device__ inline unsigned long long cubecc_shfl_raw64(cubecc_mask m, unsigned long long v,
                                                       unsigned int l) {
  return __shfl_sync(m, v, l);
}
// Every lane of this warp that exists (the last warp of a block may be partial): the active set
// wherever control flow is uniform across the warp. Elsewhere __activemask(), the lanes converged
// here, stands for it.
__device__ inline cubecc_mask cubecc_full_mask(unsigned int block, unsigned int local_index) {
  unsigned int n = block - (local_index & ~31u);
  return n >= 32u ? 0xffffffffu : (1u << n) - 1u;
}
__device__ inline cubecc_mask cubecc_ballot(cubecc_mask m, bool p) { return __ballot_sync(m, p); }
__device__ inline bool cubecc_all(cubecc_mask m, bool p) { return __all_sync(m, p); }
__device__ inline bool cubecc_any(cubecc_mask m, bool p) { return __any_sync(m, p); }
__device__ inline unsigned int cubecc_first_active(cubecc_mask m) { return __ffs(m) - 1; }
typedef __half cubecc_f16_storage;
typedef __nv_bfloat16 cubecc_bf16_storage;
__device__ inline unsigned short cubecc_f16_bits(__half h) { return __half_as_ushort(h); }
__device__ inline __half cubecc_f16_from_bits(unsigned short b) { return __ushort_as_half(b); }
__device__ inline unsigned short cubecc_bf16_bits(__nv_bfloat16 h) {
  return __bfloat16_as_ushort(h);
}
__device__ inline __nv_bfloat16 cubecc_bf16_from_bits(unsigned short b) {
  return __ushort_as_bfloat16(b);
}
__device__ inline float cubecc_f16_to_f32_rounded(__half h) { return __half2float(h); }
__device__ inline __half cubecc_f32_to_f16_rounded(float x) { return __float2half_rn(x); }
__device__ inline float cubecc_bf16_to_f32_rounded(__nv_bfloat16 h) { return __bfloat162float(h); }
__device__ inline __nv_bfloat16 cubecc_f32_to_bf16_rounded(float x) {
  return __float2bfloat16_rn(x);
}
)CUBECC";

inline constexpr const char *kCPreludeHip = R"CUBECC(
#define CUBECC_WARP ((unsigned int)warpSize)
typedef unsigned long long cubecc_mask;
__device__ inline cubecc_mask cubecc_active() { return __ballot(1); }
__device__ inline unsigned int cubecc_shfl_raw32(cubecc_mask, unsigned int v, unsigned int l) {
  return __shfl(v, (int)l);
}
__device__ inline unsigned long long cubecc_shfl_raw64(cubecc_mask, unsigned long long v,
                                                       unsigned int l) {
  return __shfl(v, (int)l);
}
// Wavefronts run in lockstep: the exec mask is the active set exactly.
__device__ inline cubecc_mask cubecc_full_mask(unsigned int, unsigned int) { return __ballot(1); }
__device__ inline cubecc_mask cubecc_ballot(cubecc_mask, bool p) { return __ballot(p); }
__device__ inline bool cubecc_all(cubecc_mask, bool p) { return __all(p); }
__device__ inline bool cubecc_any(cubecc_mask, bool p) { return __any(p); }
__device__ inline unsigned int cubecc_first_active(cubecc_mask m) {
  return __ffsll((long long)m) - 1;
}
// hipRTC cannot include hip_bfloat16.h (it needs the C library): bf16 is its 16 bits here,
// converted with round to nearest even.
struct cubecc_bf16_storage {
  unsigned short bits;
};
typedef __half cubecc_f16_storage;
__device__ inline unsigned short cubecc_f16_bits(__half h) { return __half_as_ushort(h); }
__device__ inline __half cubecc_f16_from_bits(unsigned short b) { return __ushort_as_half(b); }
__device__ inline unsigned short cubecc_bf16_bits(cubecc_bf16_storage h) { return h.bits; }
__device__ inline cubecc_bf16_storage cubecc_bf16_from_bits(unsigned short b) { return {b}; }
__device__ inline float cubecc_f16_to_f32_rounded(__half h) { return __half2float(h); }
__device__ inline __half cubecc_f32_to_f16_rounded(float x) { return __float2half_rn(x); }
__device__ inline float cubecc_bf16_to_f32_rounded(cubecc_bf16_storage h) {
  return __uint_as_float((unsigned int)h.bits << 16);
}
__device__ inline cubecc_bf16_storage cubecc_f32_to_bf16_rounded(float x) {
  unsigned int u = __float_as_uint(x);
  return {(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
)CUBECC";

} // namespace cubecc::codegen
