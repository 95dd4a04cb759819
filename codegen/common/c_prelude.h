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
// N elements of memory read or written as one access (one ld/st.v2/v4 per 16 bytes): the type
// of a vector load or store whose address is aligned to A bytes.
template <class T, int N, int A> struct alignas(A) cubecc_block { T e[N]; };


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
// cubecc-host-tested: begin (test/unit/c_prelude_test.cpp compiles this part on the host)
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
// p + q rounded to odd: the sum's error is exact (TwoSum; no contraction: --fmad=false,
// -ffp-contract=off), and an inexact sum with an even last bit moves one ulp toward the exact sum.
__device__ inline f64 cubecc_sum_to_odd(f64 p, f64 q) {
  f64 r = p + q, q_part = r - p;
  f64 err = (p - (r - q_part)) + (q - q_part);
  u64 bits = (u64)__double_as_longlong(r), err_bits = (u64)__double_as_longlong(err);
  if ((err < 0.0 || err > 0.0) && (bits & 1u) == 0u) // an infinite or NaN sum: a NaN error
    bits = ((bits ^ err_bits) >> 63) == 0u ? bits + 1u : bits - 1u;
  return __longlong_as_double((i64)bits);
}
// x * y + z of f16 or bf16 values, rounded to odd in f32: rounding that to f16 or bf16 is one
// correct rounding. The product is exact in f64. An f64 fma alone would round a bf16 product
// that is a halfway point plus a far smaller addend onto the halfway point.
__device__ inline f32 cubecc_half_fma_to_odd(f64 x, f64 y, f64 z) {
  return cubecc_f64_to_f32_odd(cubecc_sum_to_odd(x * y, z));
}
// A 64-bit integer rounded to odd in f64 (its 32-bit halves are exact there): rounding that to
// bf16 through cubecc_f64_to_f32_odd is one rounding. (f64)x alone can land on a bf16 halfway
// point: 2^60 + 2^52 + 1.
__device__ inline f64 cubecc_u64_to_f64_odd(u64 m) {
  return cubecc_sum_to_odd((f64)(u32)(m >> 32) * 4294967296.0, (f64)(u32)m);
}
__device__ inline f64 cubecc_i64_to_f64_odd(i64 v) {
  f64 r = cubecc_u64_to_f64_odd(v < 0 ? 0u - (u64)v : (u64)v);
  return v < 0 ? -r : r;
}
// cubecc-host-tested: end

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

// 8- and 16-bit atomics (the GPUs have 32- and 64-bit ones): a compare-and-swap loop on the
// aligned 32-bit word that holds the element; `next` maps the element's old bits to its new
// ones. Returns the old bits. The word's other bytes are written back as they were read, and a
// change to them between the read and the swap makes the swap fail and retry (the word never
// leaves the element's page, so reading it past a buffer's end cannot fault).
template <class Bits, class Next> __device__ inline Bits cubecc_atomic_narrow(void *p, Next next) {
  u32 *word = (u32 *)((unsigned long long)p & ~3ull);
  u32 shift = (u32)((unsigned long long)p & 3ull) * 8u;
  u32 mask = (sizeof(Bits) == 1 ? 0xffu : 0xffffu) << shift;
  u32 old = *(volatile u32 *)word, seen;
  do {
    seen = old;
    u32 desired = (seen & ~mask) | (((u32)next((Bits)((seen & mask) >> shift)) << shift) & mask);
    if (desired == seen)
      break;
    old = atomicCAS(word, seen, desired);
  } while (old != seen);
  return (Bits)((old & mask) >> shift);
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
// subgroup.barrier: the warp waits for all its lanes; shared and global accesses before it are
// visible to the warp after it (__syncwarp orders memory among the participating threads).
__device__ inline void cubecc_subgroup_barrier() { __syncwarp(); }
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
// Signed 64-bit atomic min and max (atom.min.s64 / atom.max.s64).
template <bool kMax> __device__ inline long long cubecc_atomic_min_max_i64(long long *p,
                                                                           long long v) {
  return kMax ? atomicMax(p, v) : atomicMin(p, v);
}
)CUBECC";

inline constexpr const char *kCPreludeHip = R"CUBECC(
#define CUBECC_WARP ((unsigned int)warpSize)
typedef unsigned long long cubecc_mask;
__device__ inline cubecc_mask cubecc_active() { return __ballot(1); }
// subgroup.barrier: a wavefront runs in lockstep; the fence orders its memory accesses and the
// wave barrier keeps the compiler from moving accesses across it.
__device__ inline void cubecc_subgroup_barrier() {
  __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "wavefront");
  __builtin_amdgcn_wave_barrier();
}
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
// Signed 64-bit atomic min and max: HIP has atomicMin/atomicMax on unsigned long long only, so
// a compare-and-swap loop.
template <bool kMax> __device__ inline long long cubecc_atomic_min_max_i64(long long *p,
                                                                           long long v) {
  unsigned long long *bits = (unsigned long long *)p;
  unsigned long long old = *(volatile unsigned long long *)bits, seen;
  do {
    seen = old;
    long long cur = (long long)seen;
    if (kMax ? cur >= v : cur <= v)
      break;
    old = atomicCAS(bits, seen, (unsigned long long)v);
  } while (old != seen);
  return (long long)old;
}
)CUBECC";

/// Matrix fragments (docs/ir.md §2.2), added only to kernels that use them. A fragment is the
/// invocation's share of a subgroup's matrix: N elements as raw bits (u16 for f16 and bf16, u8
/// for fp8) or f32. `cubecc_frag_pos` says which (row, column) element e of a lane holds and
/// `cubecc_frag_owner` the inverse; role 0 is 'a', 1 'b', 2 'acc'; p is the elements per 32-bit
/// register along k (1 for f32 (tf32) inputs, 2 for 16-bit inputs and accumulators, 4 for 8-bit
/// ones) and kb the k extent of a 'b' fragment over 4p.
inline constexpr const char *kCPreludeMatrixCommon = R"CUBECC(
template <class T, int N> struct cubecc_frag { T x[N]; };
__device__ inline u32 cubecc_pack16(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }
__device__ inline u32 cubecc_pack8(u8 a, u8 b, u8 c, u8 d) {
  return (u32)a | ((u32)b << 8) | ((u32)c << 16) | ((u32)d << 24);
}
)CUBECC";

/// NVIDIA's mma.sync layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8/k16/k32"): a 16 x 16
/// (16 x 8 tf32, 16 x 32 8-bit) 'a', 'b' in blocks of 8 columns, 'acc' in blocks of 8 columns.
inline constexpr const char *kCPreludeMatrixCuda = R"CUBECC(
__device__ inline void cubecc_frag_pos(int role, int p, int kb, u32 lane, int e, u32 &r, u32 &c) {
  u32 g = lane >> 2, t = lane & 3u, within = e % p, block = e / p;
  if (role == 0) {
    r = g + 8u * (block & 1u);
    c = (block >> 1) * 4u * p + p * t + within;
  } else if (role == 1) {
    r = (block % kb) * 4u * p + p * t + within;
    c = (block / kb) * 8u + g;
  } else {
    r = g + 8u * (block & 1u);
    c = (block >> 1) * 8u + 2u * t + within;
  }
}
__device__ inline void cubecc_frag_owner(int role, int p, int kb, u32 r, u32 c, u32 &lane,
                                         int &e) {
  if (role == 0) {
    lane = (r % 8u) * 4u + (c % (4u * p)) / p;
    e = (int)(((c / (4u * p)) * 2u + r / 8u) * p + c % p);
  } else if (role == 1) {
    lane = (c % 8u) * 4u + (r % (4u * p)) / p;
    e = (int)(((c / 8u) * kb + r / (4u * p)) * p + r % p);
  } else {
    lane = (r % 8u) * 4u + (c % 8u) / 2u;
    e = (int)(((c / 8u) * 2u + r / 8u) * 2u + c % 2u);
  }
}
// One m16n8 block: d = a * b + c, with b and c/d pointing at the block's registers.
#define CUBECC_MMA_16BIT(name, type)                                                             \
  __device__ inline void name(const u16 *a, const u16 *b, const f32 *c, f32 *d) {               \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 {%0, %1, %2, %3}, " \
                 "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"                             \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                \
                 : "r"(cubecc_pack16(a[0], a[1])), "r"(cubecc_pack16(a[2], a[3])),               \
                   "r"(cubecc_pack16(a[4], a[5])), "r"(cubecc_pack16(a[6], a[7])),               \
                   "r"(cubecc_pack16(b[0], b[1])), "r"(cubecc_pack16(b[2], b[3])), "f"(c[0]),    \
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));                                             \
  }
CUBECC_MMA_16BIT(cubecc_mma_f16_f32, "f16")
CUBECC_MMA_16BIT(cubecc_mma_bf16_f32, "bf16")
__device__ inline void cubecc_mma_f16_f16(const u16 *a, const u16 *b, const u16 *c, u16 *d) {
  u32 d0, d1;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, "
               "{%6, %7}, {%8, %9};"
               : "=r"(d0), "=r"(d1)
               : "r"(cubecc_pack16(a[0], a[1])), "r"(cubecc_pack16(a[2], a[3])),
                 "r"(cubecc_pack16(a[4], a[5])), "r"(cubecc_pack16(a[6], a[7])),
                 "r"(cubecc_pack16(b[0], b[1])), "r"(cubecc_pack16(b[2], b[3])),
                 "r"(cubecc_pack16(c[0], c[1])), "r"(cubecc_pack16(c[2], c[3])));
  d[0] = (u16)d0;
  d[1] = (u16)(d0 >> 16);
  d[2] = (u16)d1;
  d[3] = (u16)(d1 >> 16);
}
// 8-bit operands (m16n8k32): four 32-bit registers of 'a', two of 'b', four of 'c' and 'd'.
#define CUBECC_MMA_K32(name, ctype, cconstraint, shape)                                          \
  __device__ inline void name(const u8 *a, const u8 *b, const ctype *c, ctype *d) {             \
    asm volatile("mma.sync.aligned.m16n8k32.row.col." shape " {%0, %1, %2, %3}, "                \
                 "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"                             \
                 : "=" cconstraint(d[0]), "=" cconstraint(d[1]), "=" cconstraint(d[2]),          \
                   "=" cconstraint(d[3])                                                         \
                 : "r"(cubecc_pack8(a[0], a[1], a[2], a[3])),                                    \
                   "r"(cubecc_pack8(a[4], a[5], a[6], a[7])),                                    \
                   "r"(cubecc_pack8(a[8], a[9], a[10], a[11])),                                  \
                   "r"(cubecc_pack8(a[12], a[13], a[14], a[15])),                                \
                   "r"(cubecc_pack8(b[0], b[1], b[2], b[3])),                                    \
                   "r"(cubecc_pack8(b[4], b[5], b[6], b[7])), cconstraint(c[0]),                 \
                   cconstraint(c[1]), cconstraint(c[2]), cconstraint(c[3]));                     \
  }
// Integers (sm_80 and later): the exact sum wrapped to 32 bits (no .satfinite), as the
// interpreter defines it.
CUBECC_MMA_K32(cubecc_mma_i8_i32, i32, "r", "s32.s8.s8.s32")
CUBECC_MMA_K32(cubecc_mma_u8_i32, i32, "r", "s32.u8.u8.s32")
CUBECC_MMA_K32(cubecc_mma_i8_u8_i32, i32, "r", "s32.s8.u8.s32")
CUBECC_MMA_K32(cubecc_mma_u8_i8_i32, i32, "r", "s32.u8.s8.s32")
// f32 operands (m16n8k8, sm_80): each rounded to tf32 (cvt.rna, as ir::round_to_tf32); four
// registers of 'a', two of 'b'.
__device__ inline u32 cubecc_tf32(f32 x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ inline void cubecc_mma_f32_f32(const f32 *a, const f32 *b, const f32 *c, f32 *d) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(cubecc_tf32(a[0])), "r"(cubecc_tf32(a[1])), "r"(cubecc_tf32(a[2])),
                 "r"(cubecc_tf32(a[3])), "r"(cubecc_tf32(b[0])), "r"(cubecc_tf32(b[1])),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
#if __CUDA_ARCH__ >= 890
CUBECC_MMA_K32(cubecc_mma_e4m3_f32, f32, "f", "f32.e4m3.e4m3.f32")
CUBECC_MMA_K32(cubecc_mma_e5m2_f32, f32, "f", "f32.e5m2.e5m2.f32")
CUBECC_MMA_K32(cubecc_mma_e4m3_e5m2_f32, f32, "f", "f32.e4m3.e5m2.f32")
CUBECC_MMA_K32(cubecc_mma_e5m2_e4m3_f32, f32, "f", "f32.e5m2.e4m3.f32")
#endif
)CUBECC";

/// AMD's MFMA layouts for v_mfma_f32_16x16x16{f16,bf16_1k} on a 64-lane wavefront (CDNA2 ISA,
/// "Dependent Matrix Operations"): lane l holds 'a' row l % 16, columns 4(l / 16) .. +3; 'b' and
/// 'acc' column l % 16, rows 4(l / 16) .. +3.
inline constexpr const char *kCPreludeMatrixHip = R"CUBECC(
__device__ inline void cubecc_frag_pos(int role, int, int, u32 lane, int e, u32 &r, u32 &c) {
  u32 across = lane % 16u, along = 4u * (lane / 16u) + (u32)e;
  r = role == 0 ? across : along;
  c = role == 0 ? along : across;
}
__device__ inline void cubecc_frag_owner(int role, int, int, u32 r, u32 c, u32 &lane, int &e) {
  u32 across = role == 0 ? r : c, along = role == 0 ? c : r;
  lane = across + 16u * (along / 4u);
  e = (int)(along % 4u);
}
typedef _Float16 cubecc_half4 __attribute__((ext_vector_type(4)));
typedef short cubecc_short4 __attribute__((ext_vector_type(4)));
typedef float cubecc_float4 __attribute__((ext_vector_type(4)));
__device__ inline void cubecc_mma_f16_f32(const u16 *a, const u16 *b, const f32 *c, f32 *d) {
  cubecc_half4 va, vb;
  for (int i = 0; i < 4; ++i) {
    va[i] = __builtin_bit_cast(_Float16, a[i]);
    vb[i] = __builtin_bit_cast(_Float16, b[i]);
  }
  cubecc_float4 vc = {c[0], c[1], c[2], c[3]};
  cubecc_float4 vd = __builtin_amdgcn_mfma_f32_16x16x16f16(va, vb, vc, 0, 0, 0);
  for (int i = 0; i < 4; ++i)
    d[i] = vd[i];
}
__device__ inline void cubecc_mma_bf16_f32(const u16 *a, const u16 *b, const f32 *c, f32 *d) {
  cubecc_short4 va, vb;
  for (int i = 0; i < 4; ++i) {
    va[i] = (short)a[i];
    vb[i] = (short)b[i];
  }
  cubecc_float4 vc = {c[0], c[1], c[2], c[3]};
  cubecc_float4 vd = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(va, vb, vc, 0, 0, 0);
  for (int i = 0; i < 4; ++i)
    d[i] = vd[i];
}
)CUBECC";

} // namespace cubecc::codegen
