//===- kernels.h - The example kernels' functions, for typed launches -------------------------===//
//
// Declarations of the kernel functions of examples/kernels/*.cpp, instantiated there for every
// configuration they register (each .cpp ends with explicit instantiations), so that an
// application can launch them typed: `cubecc::launch<examples::axpy<1>>(rt, grid, x, y, 2.0f)`
// binds its arguments from axpy's signature and finds the kernel registered for it
// (examples/apps/run_examples.cpp). The definitions stay in the .cpp files, where the kernels'
// source locations point.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <cubecc/dsl.h>

#include <cstdint>

namespace cubecc::examples {

/// y = a * x + y; `kWidth` elements per invocation (axpy.cpp).
template <int kWidth>
void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a);
extern template void axpy<1>(dsl::Tensor<const float>, dsl::Tensor<float>, dsl::Scalar<float>);
extern template void axpy<4>(dsl::Tensor<const float>, dsl::Tensor<float>, dsl::Scalar<float>);

/// Counts of the values below kBins (histogram.cpp).
template <int kBins, int kWorkgroup>
void histogram(dsl::Tensor<const uint32_t> in, dsl::Tensor<uint32_t> hist);
extern template void histogram<256, 256>(dsl::Tensor<const uint32_t>, dsl::Tensor<uint32_t>);
extern template void histogram<1000, 256>(dsl::Tensor<const uint32_t>, dsl::Tensor<uint32_t>);

/// c = a b in tiles of kTM x kTN, kTK deep (matmul.cpp).
template <int kTM, int kTN, int kTK>
void matmul(dsl::Tensor<const float, 2> a, dsl::Tensor<const float, 2> b, dsl::Tensor<float, 2> c);
extern template void matmul<16, 16, 16>(dsl::Tensor<const float, 2>, dsl::Tensor<const float, 2>,
                                        dsl::Tensor<float, 2>);
extern template void matmul<32, 32, 8>(dsl::Tensor<const float, 2>, dsl::Tensor<const float, 2>,
                                       dsl::Tensor<float, 2>);

/// Inclusive prefix sums per block of kWorkgroup elements, and each block's sum (prefix_sum.cpp).
template <class T, int kWorkgroup>
void prefix_sum(dsl::Tensor<const T> in, dsl::Tensor<T> out, dsl::Tensor<T> block_sums);
extern template void prefix_sum<uint32_t, 256>(dsl::Tensor<const uint32_t>, dsl::Tensor<uint32_t>,
                                               dsl::Tensor<uint32_t>);
extern template void prefix_sum<float, 256>(dsl::Tensor<const float>, dsl::Tensor<float>,
                                            dsl::Tensor<float>);

/// One partial sum or maximum per workgroup (reduce.cpp).
enum class ReduceOp { Sum, Max };
template <ReduceOp Op, int kWorkgroup, int kWidth = 1>
void reduce(dsl::Tensor<const float> in, dsl::Tensor<float> out);
extern template void reduce<ReduceOp::Sum, 256>(dsl::Tensor<const float>, dsl::Tensor<float>);
extern template void reduce<ReduceOp::Max, 256>(dsl::Tensor<const float>, dsl::Tensor<float>);
extern template void reduce<ReduceOp::Sum, 256, 4>(dsl::Tensor<const float>, dsl::Tensor<float>);

/// The softmax of each row, one workgroup per row; `kWidth` elements per load where the rows
/// allow it (softmax.cpp).
template <int kWorkgroup, int kWidth = 1>
void softmax(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out);
extern template void softmax<256>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);
extern template void softmax<256, 4>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);

/// out = in^T through shared tiles of kTile x kTile (transpose.cpp).
template <int kTile, int kRows>
void transpose(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out);
extern template void transpose<32, 8>(dsl::Tensor<const float, 2>, dsl::Tensor<float, 2>);

} // namespace cubecc::examples
