//===- gemm.h - The tensor-core GEMM's configurations, for launches and benchmarks ------------===//
//
// gemm.cpp registers gemm<T, config...> for T = f16 and bf16 and every configuration of
// GemmVariants and GemmWave64Variants, and for T = e4m3 every one of GemmFp8Variants, as kernels
// named by GemmVariantInfo::name ("gemm_f16_128x128x32_w64x64_s2_v8"), and the tunables
// "gemm_f16" and "gemm_bf16" over GemmVariants, "gemm_e4m3" over GemmFp8Variants. An application
// (or bench/gpu_roofline) launches variant v at M x N x K with gemm_launch(v, m, n, k): its grid
// and workgroup.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <cubecc/dsl.h>

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace cubecc::examples {

/// One configuration of the GEMM: block tile kBM x kBN, kBK deep; warp tile kWM x kWN; kStages
/// shared-memory buffers (1: one; 2: two, the next tile's global loads held in registers while
/// the current one is multiplied; 3 or 4: a pipeline of asynchronous copies, cp.async on sm_80
/// and later, kStages - 1 tiles in flight); kVec elements per global load or copy; the subgroup
/// size it assumes.
template <int kBM, int kBN, int kBK, int kWM, int kWN, int kStages, int kVec, int kSubgroup>
struct GemmConfig {
  static_assert(kBM % kWM == 0 && kBN % kWN == 0, "warp tiles divide the block tile");
  static_assert(kWM % 16 == 0 && kWN % 16 == 0 && kBK % 16 == 0, "16x16 fragments, 16 deep");
  static_assert(kVec == 1 || kVec == 2 || kVec == 4 || kVec == 8 || kVec == 16,
                "loads of 1 to 16 elements");
  static constexpr int bm = kBM, bn = kBN, bk = kBK, wm = kWM, wn = kWN, stages = kStages,
                       vec = kVec, subgroup = kSubgroup;
  static constexpr int warps_m = kBM / kWM, warps_n = kBN / kWN, warps = warps_m * warps_n;
  static constexpr uint32_t threads = static_cast<uint32_t>(warps * kSubgroup);
  static_assert(threads <= 1024, "at most 1024 invocations per workgroup");
};

/// The variants the tunables choose among, in order (their index is the variant number): large
/// square tiles, a tall one, small-M tiles for the skinny products of LLM inference (M = 1 ...
/// 64), the same kinds with asynchronous-copy pipelines, and a single-buffered, scalar-load
/// baseline. All assume 32-wide subgroups (NVIDIA): they
/// are registered with subgroup_size = 32, which a 64-wide target (AMD CDNA) refuses.
using GemmVariants =
    std::tuple<GemmConfig<128, 128, 32, 64, 64, 2, 8, 32>,
               GemmConfig<128, 64, 32, 64, 32, 2, 8, 32>, GemmConfig<64, 64, 32, 32, 32, 2, 8, 32>,
               GemmConfig<32, 128, 64, 32, 32, 2, 8, 32>, GemmConfig<16, 128, 64, 16, 32, 2, 8, 32>,
               GemmConfig<128, 64, 32, 64, 32, 3, 8, 32>, GemmConfig<64, 64, 32, 32, 32, 4, 8, 32>,
               GemmConfig<16, 128, 32, 16, 32, 3, 8, 32>, GemmConfig<32, 32, 32, 16, 16, 1, 1, 32>>;
/// Registered too, for 64-wide wavefronts (AMD CDNA, subgroup_size = 64); not among the
/// tunables' variants, which are NVIDIA's.
using GemmWave64Variants = std::tuple<GemmConfig<64, 64, 32, 32, 32, 2, 8, 64>>;

/// The fp8 GEMM (e4m3 in, f32 out; mma.sync m16n8k32, sm_89 and later): 16x16x32 fragments,
/// tiles copied asynchronously 16 elements (128 bits) at a time. Registered as
/// "gemm_e4m3_<config>" and the tunable "gemm_e4m3".
using GemmFp8Variants = std::tuple<GemmConfig<128, 128, 32, 64, 64, 3, 16, 32>,
                                   GemmConfig<64, 64, 64, 32, 32, 4, 16, 32>,
                                   GemmConfig<16, 128, 64, 16, 32, 3, 16, 32>>;

/// A configuration, at run time.
struct GemmVariantInfo {
  int bm, bn, bk, wm, wn, stages, vec, subgroup;
  uint32_t threads;
  /// "gemm_f16_128x128x32_w64x64_s2_v8" (and "_sg64" for 64-wide subgroups).
  std::string name(const std::string &type) const;
  /// The registry's configuration text: "bm=128,bn=128,bk=32,wm=64,wn=64,stages=2,vec=8,sg=32".
  std::string describe() const;
};

/// GemmVariants, then GemmWave64Variants, at run time (f16 and bf16).
const std::vector<GemmVariantInfo> &gemm_variants();
/// GemmFp8Variants, at run time (e4m3).
const std::vector<GemmVariantInfo> &gemm_fp8_variants();

struct GemmLaunch {
  bool valid = false;                ///< false: the variant cannot run this shape
  std::array<uint32_t, 3> grid = {}; ///< workgroups
};
/// How variant `variant` (an index into gemm_variants()) runs C(m x n) = A(m x k) B(k x n):
/// invalid when a size is 0 or does not fit the u32 parameters, or when k or n is not a
/// multiple of the variant's load width.
GemmLaunch gemm_launch(size_t variant, uint64_t m, uint64_t n, uint64_t k);
/// The same for any variant, fp8 ones included.
GemmLaunch gemm_launch(const GemmVariantInfo &variant, uint64_t m, uint64_t n, uint64_t k);

/// The kernel (gemm.cpp), instantiated there for every configuration above.
template <class T, int kBM, int kBN, int kBK, int kWM, int kWN, int kStages, int kVec,
          int kSubgroup>
void gemm(dsl::Tensor<const T, 2> a, dsl::Tensor<const T, 2> b, dsl::Tensor<float, 2> c);

} // namespace cubecc::examples
