//===- matmul.cpp - C = A * B through shared-memory tiles ------------------------------------===//
//
// C(i, j) = sum_k A(i, k) * B(k, j) for A: M x K, B: K x N, C: M x N (any strides, f32).
//
// Each workgroup computes one kTM x kTN tile of C, one element per invocation: the workgroup is
// kTN x kTM invocations (x along the columns of C, so neighbouring invocations touch
// neighbouring columns of B and C). It walks K in steps of kTK (a runtime loop): the workgroup
// copies a kTM x kTK tile of A and a kTK x kTN tile of B into shared memory, waits at a barrier,
// accumulates the kTK products of its row of the A tile and its column of the B tile (a comptime
// loop, unrolled, each step a fused multiply-add), and waits again before the tiles are
// overwritten. Elements past the edges of A and B are loaded as zeros, so any M, N and K work;
// launch ceil(N / kTN) x ceil(M / kTM) workgroups.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

namespace {

/// Copies the rows x cols tile of `src` whose top-left element is (row0, col0) into `tile`
/// (row-major, `cols` per row), with zeros for elements outside `src`. The workgroup's
/// `threads` invocations share the copy: invocation `local` copies elements local, local +
/// threads, ... (a comptime loop; consecutive invocations copy consecutive elements of a row).
template <int rows, int cols, int threads, int N>
void load_tile(const dsl::Shared<float, N> &tile, const dsl::Tensor<const float, 2> &src,
               const dsl::Val<uint32_t> &row0, const dsl::Val<uint32_t> &col0,
               const dsl::Val<uint32_t> &local) {
  static_assert(rows * cols <= N, "the tile fits in its shared array");
  for (int first = 0; first < rows * cols; first += threads) {
    dsl::Val<uint32_t> e = local + first; // the element of the tile
    auto copy = [&] {
      dsl::Val<uint32_t> r = row0 + e / cols;
      dsl::Val<uint32_t> c = col0 + e % cols;
      dsl::if_(r < src.shape(0) && c < src.shape(1), [&] { tile[e] = src(r, c); }).else_([&] {
        tile[e] = 0.0f;
      });
    };
    // Only the last round can run past the tile, and only when the invocations do not divide it.
    if constexpr ((rows * cols) % threads == 0)
      copy();
    else
      dsl::if_(e < rows * cols, copy);
  }
}

} // namespace

template <int kTM, int kTN, int kTK>
void matmul(dsl::Tensor<const float, 2> a, dsl::Tensor<const float, 2> b, dsl::Tensor<float, 2> c) {
  constexpr int kThreads = kTM * kTN;
  static_assert(kThreads <= 1024, "one invocation per element of the C tile");
  dsl::Shared<float, kTM * kTK> a_tile;
  dsl::Shared<float, kTK * kTN> b_tile;

  dsl::Val<uint32_t> m = a.shape(0);
  dsl::Val<uint32_t> k_size = a.shape(1);
  dsl::Val<uint32_t> n = b.shape(1);
  dsl::Dim3 local = dsl::local_id();
  dsl::Dim3 group = dsl::workgroup_id();
  dsl::Val<uint32_t> tx = local.x; // the column within the C tile
  dsl::Val<uint32_t> ty = local.y; // the row within the C tile
  dsl::Val<uint32_t> index = dsl::local_index();
  dsl::Val<uint32_t> row0 = group.y * kTM;
  dsl::Val<uint32_t> col0 = group.x * kTN;

  dsl::Var<float> acc = 0.0f;
  dsl::Val<uint32_t> k_tiles = (k_size + (kTK - 1)) / kTK;
  // The bounds are parameters, the same for every invocation: the barriers inside are reached by
  // the whole workgroup the same number of times.
  dsl::for_(0u, k_tiles, [&](dsl::Val<uint32_t> t) {
    dsl::Val<uint32_t> k0 = t * kTK;
    load_tile<kTM, kTK, kThreads>(a_tile, a, row0, k0, index);
    load_tile<kTK, kTN, kThreads>(b_tile, b, k0, col0, index);
    dsl::barrier();
    for (int k = 0; k < kTK; ++k)
      acc = dsl::fma(a_tile[ty * kTK + k], b_tile[tx + k * kTN], acc);
    dsl::barrier();
  });

  dsl::Val<uint32_t> row = row0 + ty;
  dsl::Val<uint32_t> col = col0 + tx;
  dsl::if_(row < m && col < n, [&] { c(row, col) = acc; });
}

static const bool registered_matmul =
    dsl::register_kernel<matmul<16, 16, 16>>(
        "matmul_16x16x16", "tm=16,tn=16,tk=16",
        {.workgroup = {16, 16, 1}, .parameter_names = {"a", "b", "c"}}) &&
    dsl::register_kernel<matmul<32, 32, 8>>(
        "matmul_32x32x8", "tm=32,tn=32,tk=8",
        {.workgroup = {32, 32, 1}, .parameter_names = {"a", "b", "c"}});

namespace {

/// How `cubecc tune` launches variant `variant` of the matmul tunable at {m, n, k}: row-major A,
/// B and C, one workgroup per tile of C.
bool describe_matmul(uint32_t variant, std::span<const uint64_t> shape,
                     dsl::TunableLaunch &launch) {
  constexpr uint32_t kTiles[] = {16, 32}; // the C tile (square) of each variant, in order
  const uint64_t m = shape[0], n = shape[1], k = shape[2];
  // Shapes and strides are u32 parameters; an empty problem launches nothing worth timing.
  constexpr uint64_t kMax = 0xffffffffu;
  if (variant >= 2 || m == 0 || n == 0 || k == 0 || m * k > kMax || k * n > kMax || m * n > kMax)
    return false;
  const uint64_t tile = kTiles[variant];
  launch.grid = {static_cast<uint32_t>((n + tile - 1) / tile),
                 static_cast<uint32_t>((m + tile - 1) / tile), 1};
  launch.add_row_major_tensor(m, k); // a
  launch.add_row_major_tensor(k, n); // b
  launch.add_row_major_tensor(m, n); // c
  return true;
}

} // namespace

// Both variants add the K products of an element in the same order with fma, so they agree
// bit for bit: the tuner's cross-check is exact.
static const bool registered_matmul_tunable = dsl::register_tunable({
    .name = "matmul",
    .variants = {"matmul_16x16x16", "matmul_32x32x8"},
    .dimensions = {"m", "n", "k"},
    .anchors = {{128, 128, 128}, {256, 256, 256}},
    .element_types = "f32",
    .relative_tolerance = 0,
    .describe = describe_matmul,
});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void matmul<16, 16, 16>(dsl::Tensor<const float, 2>, dsl::Tensor<const float, 2>,
                                 dsl::Tensor<float, 2>);
template void matmul<32, 32, 8>(dsl::Tensor<const float, 2>, dsl::Tensor<const float, 2>,
                                dsl::Tensor<float, 2>);

} // namespace cubecc::examples
