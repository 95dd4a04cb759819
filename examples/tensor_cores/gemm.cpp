//===- gemm.cpp - C = A * B on tensor cores: f16/bf16 in, f32 out ----------------------------===//
//
// C(i, j) = sum_k A(i, k) * B(k, j) for A: M x K and B: K x N of f16, bf16 or e4m3 (fp8), C:
// M x N of f32, each row-major with unit column stride (rows may be padded: the row strides are
// parameters). fp8 fragments are 16x16x32 (mma.sync m16n8k32, sm_89 and later).
//
// The workgroup computes one kBM x kBN tile of C; its subgroups (kSubgroup invocations each) one
// kWM x kWN warp tile each, as (kWM / 16) x (kWN / 16) 16x16 accumulators carried through the K
// loop (dsl::for_carry). Each step of kBK along K:
//   1. the workgroup copies the A tile (kBM x kBK) and the B tile (kBK x kBN) from global memory
//      into shared memory, kVec elements per load (kVec = 8: 128-bit loads); chunks past the
//      edges of A and B are zeros, so any M, N and K work as long as K and N are multiples of
//      kVec (the vector loads must not straddle a row end);
//   2. every subgroup loads its A and B fragments from shared memory (ldmatrix on NVIDIA) and
//      multiplies them (16x16x16, f32 accumulation: mma.sync on NVIDIA, MFMA on AMD).
// With kStages = 2 the tiles are double-buffered: the global loads of step t + 1 are issued
// before the multiplications of step t and stored to the other buffer after them, so their
// latency hides behind the tensor cores, with one barrier per step. Shared rows are padded by 8
// elements, so that the 16 rows a fragment load reads fall in different banks.
//
// A 16x16 block of C that lies wholly inside C is stored straight from the accumulator; one on
// the bottom or right edge goes through a per-subgroup scratch tile in shared memory and is
// copied element by element, inside C only.
//
// Each variant is registered with subgroup_size = kSubgroup: a target whose subgroups differ
// refuses it (docs/ir.md §6.1). Launch ceil(N / kBN) x ceil(M / kBM) workgroups of kThreads
// invocations. The tunable "gemm_f16"
// ("gemm_bf16") picks among the variants registered below per device and shape; `cubecc tune`
// times them on the device (docs/autotune.md).
//
//===-----------------------------------------------------------------------------------------===//
#include "gemm.h"

#include <fmt/format.h>

#include <string>
#include <type_traits>
#include <vector>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

namespace {

/// Elements added to each shared row: 16 bytes (bank spread; rows stay 16-byte aligned).
template <class T> constexpr int kPad = 16 / static_cast<int>(dsl::detail::bytes_of<T>());
/// The depth of a fragment: 16 for 16-bit inputs, 32 for fp8 (mma.sync m16n8k32).
template <class T> constexpr int kFragK = dsl::detail::bytes_of<T>() == 1 ? 32 : 16;

/// kVec consecutive elements: one load.
template <class T, int kVec>
using Chunk = dsl::Val<std::conditional_t<kVec == 1, T, dsl::Vec<T, kVec>>>;

/// Loads this invocation's chunks of the rows x cols tile of `src` at (row0, col0): chunk e
/// (e = tid, tid + threads, ...) is kVec consecutive elements of one row; chunks outside `src`
/// (or past the tile) are zeros.
template <class T, int rows, int cols, int threads, int kVec>
std::vector<Chunk<T, kVec>> fetch(const dsl::Tensor<const T, 2> &src,
                                  const dsl::Val<uint32_t> &row0, const dsl::Val<uint32_t> &col0,
                                  const dsl::Val<uint32_t> &tid) {
  constexpr int kChunks = rows * cols / kVec;
  constexpr int kPerRow = cols / kVec;
  static_assert(cols % kVec == 0, "a tile row is whole chunks");
  std::vector<Chunk<T, kVec>> out;
  for (int first = 0; first < kChunks; first += threads) {
    dsl::Val<uint32_t> e = tid + first;
    dsl::Val<uint32_t> r = row0 + e / kPerRow;
    dsl::Val<uint32_t> c = col0 + (e % kPerRow) * kVec;
    dsl::Val<bool> inside = r < src.shape(0) && c < src.shape(1);
    if constexpr (kChunks % threads != 0)
      inside = inside && e < kChunks;
    dsl::Val<uint32_t> at = r * src.stride(0) + c;
    if constexpr (kVec == 1) {
      out.emplace_back(dsl::load(src, at, inside, 0.0f));
    } else {
      dsl::Val<dsl::Vec<T, kVec>> zero = dsl::splat<kVec>(dsl::Val<T>(0.0f));
      out.emplace_back(src.template load<kVec>(at, inside, zero));
    }
  }
  return out;
}

/// Stores what fetch loaded into `tile` (row-major, `ld` elements per row) from element `base`.
template <class T, int rows, int cols, int threads, int kVec, int ld, int N>
void put(const dsl::Shared<T, N> &tile, const dsl::Val<uint32_t> &base,
         const std::vector<Chunk<T, kVec>> &chunks, const dsl::Val<uint32_t> &tid) {
  constexpr int kChunks = rows * cols / kVec;
  constexpr int kPerRow = cols / kVec;
  for (int round = 0, first = 0; first < kChunks; ++round, first += threads) {
    dsl::Val<uint32_t> e = tid + first;
    auto store = [&] {
      dsl::Val<uint32_t> at = base + (e / kPerRow) * ld + (e % kPerRow) * kVec;
      if constexpr (kVec == 1)
        tile[at] = chunks[round];
      else
        tile.template store<kVec>(at, chunks[round]);
    };
    if constexpr (kChunks % threads == 0)
      store();
    else
      dsl::if_(e < kChunks, store);
  }
}

/// Starts asynchronous copies of the rows x cols tile of `src` at (row0, col0) into `tile`
/// (row-major, `ld` elements per row) from element `base`, kVec elements per copy, chunk e
/// (e = tid, tid + threads, ...) as fetch() reads them; chunks outside `src` are zeros.
template <class T, int rows, int cols, int threads, int kVec, int ld, int N>
void copy_tile_async(const dsl::Shared<T, N> &tile, const dsl::Val<uint32_t> &base,
                     const dsl::Tensor<const T, 2> &src, const dsl::Val<uint32_t> &row0,
                     const dsl::Val<uint32_t> &col0, const dsl::Val<uint32_t> &tid) {
  constexpr int kChunks = rows * cols / kVec;
  constexpr int kPerRow = cols / kVec;
  static_assert(cols % kVec == 0, "a tile row is whole chunks");
  for (int first = 0; first < kChunks; first += threads) {
    dsl::Val<uint32_t> e = tid + first;
    auto copy = [&] {
      dsl::Val<uint32_t> r = row0 + e / kPerRow;
      dsl::Val<uint32_t> c = col0 + (e % kPerRow) * kVec;
      dsl::Val<uint32_t> at = base + (e / kPerRow) * ld + (e % kPerRow) * kVec;
      dsl::copy_async<kVec>(tile, at, src, r * src.stride(0) + c,
                            r < src.shape(0) && c < src.shape(1));
    };
    if constexpr (kChunks % threads == 0)
      copy();
    else
      dsl::if_(e < kChunks, copy);
  }
}

/// An array of accumulators, each zero.
template <class Accs> Accs zero_accumulators() {
  using Acc = typename Accs::value_type;
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return Accs{(static_cast<void>(I), Acc::fill(0.0f))...};
  }
  (std::make_index_sequence<std::tuple_size_v<Accs>>{});
}

} // namespace

template <class T, int kBM, int kBN, int kBK, int kWM, int kWN, int kStages, int kVec,
          int kSubgroup>
void gemm(dsl::Tensor<const T, 2> a, dsl::Tensor<const T, 2> b, dsl::Tensor<float, 2> c) {
  using Config = GemmConfig<kBM, kBN, kBK, kWM, kWN, kStages, kVec, kSubgroup>;
  constexpr int kThreads = Config::threads;
  constexpr int kFM = kWM / 16, kFN = kWN / 16; // fragments per warp tile
  constexpr int kFK = kFragK<T>;
  constexpr int kLdA = kBK + kPad<T>, kLdB = kBN + kPad<T>;
  constexpr int kATile = kBM * kLdA, kBTile = kBK * kLdB;
  static_assert(kStages >= 1 && kStages <= 4, "one to four shared-memory stages");
  static_assert(kBK % kFK == 0, "the K tile is whole fragments");
  static_assert(dsl::detail::bytes_of<T>() == 2 || kStages >= 3,
                "fp8 tiles are copied asynchronously (kStages 3 or 4)");
  using FragA = dsl::MatrixA<T, 16, kFK>;
  using FragB = dsl::MatrixB<T, kFK, 16>;
  using Acc = dsl::Accumulator<float, 16, 16>;
  using Accs = std::array<Acc, kFM * kFN>;

  dsl::Shared<T, kStages * kATile> a_tile;
  dsl::Shared<T, kStages * kBTile> b_tile;
  dsl::Shared<float, Config::warps * 256> scratch;

  dsl::Val<uint32_t> m = a.shape(0);
  dsl::Val<uint32_t> k_size = a.shape(1);
  dsl::Val<uint32_t> n = b.shape(1);
  dsl::Dim3 group = dsl::workgroup_id();
  dsl::Val<uint32_t> tid = dsl::local_index();
  // The warp tile of this subgroup: the kernel is registered with subgroup_size = kSubgroup, so
  // a target with other subgroups refuses it rather than leaving tiles uncomputed.
  dsl::Val<uint32_t> warp = dsl::subgroup_id();
  dsl::Val<uint32_t> row0 = group.y * kBM;
  dsl::Val<uint32_t> col0 = group.x * kBN;
  dsl::Val<uint32_t> warp_row = (warp / Config::warps_n) * kWM; // within the block tile
  dsl::Val<uint32_t> warp_col = (warp % Config::warps_n) * kWN;

  // (Generic lambdas: instantiated only by the variants that load through registers.)
  auto fetch_a = [&](const auto &k0) {
    return fetch<T, kBM, kBK, kThreads, kVec>(a, row0, k0, tid);
  };
  auto fetch_b = [&](const auto &k0) {
    return fetch<T, kBK, kBN, kThreads, kVec>(b, k0, col0, tid);
  };
  auto copy_tiles_async = [&](const dsl::Val<uint32_t> &stage, const dsl::Val<uint32_t> &k0) {
    if constexpr (kStages >= 3) { // (the copies need kVec elements of 4 to 16 bytes)
      copy_tile_async<T, kBM, kBK, kThreads, kVec, kLdA>(a_tile, stage * kATile, a, row0, k0, tid);
      copy_tile_async<T, kBK, kBN, kThreads, kVec, kLdB>(b_tile, stage * kBTile, b, k0, col0, tid);
      dsl::commit_async();
    }
  };
  auto put_tiles = [&](const dsl::Val<uint32_t> &stage, const auto &a_chunks,
                       const auto &b_chunks) {
    put<T, kBM, kBK, kThreads, kVec, kLdA>(a_tile, stage * kATile, a_chunks, tid);
    put<T, kBK, kBN, kThreads, kVec, kLdB>(b_tile, stage * kBTile, b_chunks, tid);
  };
  // The products of one kBK step from the tiles of `stage`.
  auto multiply = [&](const dsl::Val<uint32_t> &stage, const Accs &acc) {
    Accs next = acc;
    dsl::Val<uint32_t> a_base = stage * kATile + warp_row * kLdA;
    dsl::Val<uint32_t> b_base = stage * kBTile + warp_col;
    for (int kk = 0; kk < kBK; kk += kFK) {
      std::vector<FragA> fa;
      std::vector<FragB> fb;
      for (int i = 0; i < kFM; ++i)
        fa.push_back(FragA::load(a_tile, a_base + (i * 16 * kLdA + kk), kLdA));
      for (int j = 0; j < kFN; ++j)
        fb.push_back(FragB::load(b_tile, b_base + (kk * kLdB + j * 16), kLdB));
      for (int i = 0; i < kFM; ++i)
        for (int j = 0; j < kFN; ++j)
          next[i * kFN + j] = dsl::mma(fa[i], fb[j], next[i * kFN + j]);
    }
    return next;
  };

  Accs zero = zero_accumulators<Accs>();
  dsl::Val<uint32_t> k_tiles = (k_size + (kBK - 1)) / kBK;
  Accs acc = zero;
  if constexpr (kStages == 1) {
    acc = dsl::for_carry(0u, k_tiles, zero, [&](dsl::Val<uint32_t> t, const Accs &sum) {
      dsl::Val<uint32_t> k0 = t * kBK;
      dsl::Val<uint32_t> stage = 0u;
      auto a_chunks = fetch_a(k0);
      auto b_chunks = fetch_b(k0);
      put_tiles(stage, a_chunks, b_chunks);
      dsl::barrier();
      Accs next = multiply(stage, sum);
      dsl::barrier();
      return next;
    });
  } else if constexpr (kStages >= 3) {
    // Tiles 0 .. kStages - 2 in flight before the loop, one group each; step t waits for tile
    // t, then (after the barrier: every subgroup is done with step t - 1's buffer) starts tile
    // t + kStages - 1 into that buffer, and multiplies. Tiles past K are zeros, copied and never
    // read, so that every step commits one group and the wait counts stay exact.
    for (int s = 0; s < kStages - 1; ++s)
      copy_tiles_async(dsl::Val<uint32_t>(static_cast<uint32_t>(s)),
                       dsl::Val<uint32_t>(static_cast<uint32_t>(s * kBK)));
    acc = dsl::for_carry(0u, k_tiles, zero, [&](dsl::Val<uint32_t> t, const Accs &sum) {
      dsl::wait_async(kStages - 2);
      dsl::barrier();
      dsl::Val<uint32_t> ahead = t + static_cast<uint32_t>(kStages - 1);
      copy_tiles_async(ahead % static_cast<uint32_t>(kStages), ahead * kBK);
      return multiply(t % static_cast<uint32_t>(kStages), sum);
    });
    dsl::wait_async(0); // nothing in flight past the loop
  } else {
    dsl::Val<uint32_t> first = 0u;
    auto a_chunks = fetch_a(first);
    auto b_chunks = fetch_b(first);
    put_tiles(first, a_chunks, b_chunks);
    dsl::barrier();
    acc = dsl::for_carry(0u, k_tiles, zero, [&](dsl::Val<uint32_t> t, const Accs &sum) {
      // Step t + 1's loads are in flight while step t multiplies; past the last step they are
      // all outside A and B (zeros), stored to the buffer nobody reads again.
      dsl::Val<uint32_t> k_next = (t + 1u) * kBK;
      auto a_next = fetch_a(k_next);
      auto b_next = fetch_b(k_next);
      dsl::Val<uint32_t> stage = t & 1u;
      Accs next = multiply(stage, sum);
      put_tiles(stage ^ 1u, a_next, b_next);
      dsl::barrier();
      return next;
    });
  }

  // The epilogue: whole 16x16 blocks straight to C, edge blocks through the scratch tile.
  dsl::Val<uint32_t> ldc = c.stride(0);
  dsl::Val<uint32_t> lane = tid % kSubgroup;
  dsl::Val<uint32_t> own = warp * 256u;
  for (int i = 0; i < kFM; ++i)
    for (int j = 0; j < kFN; ++j) {
      dsl::Val<uint32_t> r0 = row0 + warp_row + i * 16;
      dsl::Val<uint32_t> c0 = col0 + warp_col + j * 16;
      dsl::Val<bool> whole = r0 + 16u <= m && c0 + 16u <= n;
      const Acc &block = acc[i * kFN + j];
      dsl::if_(whole, [&] { block.store(c, r0 * ldc + c0, ldc); }).else_([&] {
        block.store(scratch, own, 16u);
      });
      dsl::barrier(); // the scratch tile is written by the subgroup's matrix store
      dsl::if_(!whole, [&] {
        for (int e = 0; e < 256; e += kSubgroup) {
          dsl::Val<uint32_t> at = lane + e;
          dsl::Val<uint32_t> r = r0 + at / 16u;
          dsl::Val<uint32_t> col = c0 + at % 16u;
          dsl::if_(r < m && col < n, [&] { c(r, col) = scratch[own + at]; });
        }
      });
      dsl::barrier(); // before the scratch tile is written again
    }
}

namespace {

template <class Config> GemmVariantInfo info() {
  return {Config::bm,     Config::bn,  Config::bk,       Config::wm,     Config::wn,
          Config::stages, Config::vec, Config::subgroup, Config::threads};
}

template <class... Configs>
void add_infos(std::vector<GemmVariantInfo> &out, std::tuple<Configs...> *) {
  (out.push_back(info<Configs>()), ...);
}

/// Registers gemm<T, Config...> under its variant's name.
template <class T, class Config> bool register_gemm(const char *type_name) {
  GemmVariantInfo v = info<Config>();
  return dsl::register_kernel<gemm<T, Config::bm, Config::bn, Config::bk, Config::wm, Config::wn,
                                   Config::stages, Config::vec, Config::subgroup>>(
      v.name(type_name), v.describe(),
      {.workgroup = {Config::threads, 1, 1},
       .parameter_names = {"a", "b", "c"},
       .subgroup_size = static_cast<uint32_t>(Config::subgroup)});
}

template <class T, class... Configs>
bool register_gemms(const char *type_name, std::tuple<Configs...> *) {
  return (register_gemm<T, Configs>(type_name) && ...);
}

/// How `cubecc tune` launches variant `variant` of a gemm tunable over `Variants` (the f16/bf16
/// or the fp8 list) at {m, n, k}: row-major, contiguous A, B and C.
template <class Variants>
bool describe_gemm(uint32_t variant, std::span<const uint64_t> shape, dsl::TunableLaunch &launch) {
  const auto &list =
      std::is_same_v<Variants, GemmFp8Variants> ? gemm_fp8_variants() : gemm_variants();
  if (variant >= std::tuple_size_v<Variants>)
    return false;
  GemmLaunch l = gemm_launch(list[variant], shape[0], shape[1], shape[2]);
  if (!l.valid)
    return false;
  launch.grid = l.grid;
  const uint64_t m = shape[0], n = shape[1], k = shape[2];
  launch.add_row_major_tensor(m, k); // a
  launch.add_row_major_tensor(k, n); // b
  launch.add_row_major_tensor(m, n); // c
  return true;
}

/// The tunable's variants: the first `count` of `list` (gemm_variants() lists the wave64 ones
/// after GemmVariants).
std::vector<std::string> variant_names(const std::vector<GemmVariantInfo> &list, size_t count,
                                       const std::string &type_name) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i)
    names.push_back(list[i].name(type_name));
  return names;
}

} // namespace

std::string GemmVariantInfo::name(const std::string &type) const {
  return fmt::format("gemm_{}_{}x{}x{}_w{}x{}_s{}_v{}{}", type, bm, bn, bk, wm, wn, stages, vec,
                     subgroup == 32 ? "" : fmt::format("_sg{}", subgroup));
}

std::string GemmVariantInfo::describe() const {
  return fmt::format("bm={},bn={},bk={},wm={},wn={},stages={},vec={},sg={}", bm, bn, bk, wm, wn,
                     stages, vec, subgroup);
}

const std::vector<GemmVariantInfo> &gemm_variants() {
  static const std::vector<GemmVariantInfo> variants = [] {
    std::vector<GemmVariantInfo> out;
    add_infos(out, static_cast<GemmVariants *>(nullptr));
    add_infos(out, static_cast<GemmWave64Variants *>(nullptr));
    return out;
  }();
  return variants;
}

const std::vector<GemmVariantInfo> &gemm_fp8_variants() {
  static const std::vector<GemmVariantInfo> variants = [] {
    std::vector<GemmVariantInfo> out;
    add_infos(out, static_cast<GemmFp8Variants *>(nullptr));
    return out;
  }();
  return variants;
}

GemmLaunch gemm_launch(size_t variant, uint64_t m, uint64_t n, uint64_t k) {
  if (variant >= gemm_variants().size())
    return {};
  return gemm_launch(gemm_variants()[variant], m, n, k);
}

GemmLaunch gemm_launch(const GemmVariantInfo &v, uint64_t m, uint64_t n, uint64_t k) {
  GemmLaunch launch;
  // Shapes and strides are u32 parameters, and element indices u32 too.
  constexpr uint64_t kMax = 0xffffffffu;
  if (m == 0 || n == 0 || k == 0 || m * k > kMax || k * n > kMax || m * n > kMax ||
      k % v.vec != 0 || n % v.vec != 0)
    return launch;
  launch.valid = true;
  launch.grid = {static_cast<uint32_t>((n + v.bn - 1) / v.bn),
                 static_cast<uint32_t>((m + v.bm - 1) / v.bm), 1};
  return launch;
}

static const bool registered_gemm =
    register_gemms<dsl::f16>("f16", static_cast<GemmVariants *>(nullptr)) &&
    register_gemms<dsl::bf16>("bf16", static_cast<GemmVariants *>(nullptr)) &&
    register_gemms<dsl::f16>("f16", static_cast<GemmWave64Variants *>(nullptr)) &&
    register_gemms<dsl::bf16>("bf16", static_cast<GemmWave64Variants *>(nullptr)) &&
    register_gemms<dsl::e4m3>("e4m3", static_cast<GemmFp8Variants *>(nullptr));

// The variants sum each element's products in the hardware's own order, so two of them may
// differ in the last bits of f32: the tuner's cross-check allows 1e-3 relative.
template <class Variants> static bool register_gemm_tunable(const std::string &type) {
  const bool fp8 = std::is_same_v<Variants, GemmFp8Variants>;
  return dsl::register_tunable({
      .name = "gemm_" + type,
      .variants = variant_names(fp8 ? gemm_fp8_variants() : gemm_variants(),
                                std::tuple_size_v<Variants>, type),
      .dimensions = {"m", "n", "k"},
      .anchors = {{4096, 4096, 4096}, {16, 4096, 4096}},
      .element_types = type + ",f32",
      .relative_tolerance = 1e-3,
      .describe = describe_gemm<Variants>,
  });
}
static const bool registered_gemm_tunables = register_gemm_tunable<GemmVariants>("f16") &&
                                             register_gemm_tunable<GemmVariants>("bf16") &&
                                             register_gemm_tunable<GemmFp8Variants>("e4m3");

} // namespace cubecc::examples
