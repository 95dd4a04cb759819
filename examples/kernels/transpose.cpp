//===- transpose.cpp - out = transpose(in) for 2-D tensors, through a shared tile -------------===//
//
// out(c, r) = in(r, c); `in` is rows x cols and `out` cols x rows (any strides).
//
// Each workgroup moves one kTile x kTile tile. A direct transpose reads or writes global memory
// with a stride of a whole row between neighbouring invocations; here both sides are contiguous
// along x: the workgroup reads the tile row by row into shared memory, waits at a barrier, and
// writes it back out row by row of the transposed tile, reading shared memory down a column.
// The tile's rows are padded by one element, so that a column (consecutive ty at one tx) falls
// in kTile different banks instead of one: no bank conflicts on the transposed read.
//
// The workgroup is kTile x kRows invocations; each handles kTile / kRows elements of a column of
// the tile (a comptime loop, unrolled). Launch ceil(cols / kTile) x ceil(rows / kTile)
// workgroups; partial tiles at the edges are guarded.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

template <int kTile, int kRows>
void transpose(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out) {
  static_assert(kTile % kRows == 0, "the tile's rows are split evenly between the y invocations");
  constexpr int kPitch = kTile + 1; // the padded row length of the shared tile
  dsl::Shared<float, kTile * kPitch> tile;

  dsl::Val<uint32_t> rows = in.shape(0);
  dsl::Val<uint32_t> cols = in.shape(1);
  dsl::Dim3 local = dsl::local_id();
  dsl::Dim3 group = dsl::workgroup_id();
  dsl::Val<uint32_t> tx = local.x;
  dsl::Val<uint32_t> ty = local.y;
  dsl::Val<uint32_t> row0 = group.y * kTile; // the tile's first row of `in`
  dsl::Val<uint32_t> col0 = group.x * kTile; // and its first column

  // Read the tile: invocation (tx, ty) reads in(row0 + ty + k, col0 + tx).
  for (int k = 0; k < kTile; k += kRows) {
    dsl::Val<uint32_t> r = row0 + ty + k;
    dsl::Val<uint32_t> c = col0 + tx;
    dsl::if_(r < rows && c < cols, [&] { tile[(ty + k) * kPitch + tx] = in(r, c); });
  }
  dsl::barrier();
  // Write the transposed tile: invocation (tx, ty) writes out(col0 + ty + k, row0 + tx), which is
  // in(row0 + tx, col0 + ty + k), from the tile's column ty + k.
  for (int k = 0; k < kTile; k += kRows) {
    dsl::Val<uint32_t> r = col0 + ty + k; // a row of `out`, a column of `in`
    dsl::Val<uint32_t> c = row0 + tx;
    dsl::if_(r < cols && c < rows, [&] { out(r, c) = tile[tx * kPitch + ty + k]; });
  }
}

static const bool registered_transpose = dsl::register_kernel<transpose<32, 8>>(
    "transpose_32x8", "tile=32,rows=8",
    {.workgroup = {32, 8, 1}, .parameter_names = {"in", "out"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void transpose<32, 8>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);

} // namespace cubecc::examples
