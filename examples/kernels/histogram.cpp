//===- histogram.cpp - Counts of u32 values in kBins bins ------------------------------------===//
//
// hist(b) += the number of elements of `in` equal to b, for b < kBins. Values >= kBins are not
// counted. `hist` has kBins elements and must be zeroed before the first launch; launches
// accumulate into it.
//
// Each workgroup first counts into its own histogram in shared memory, so that the many atomics
// go to fast workgroup memory and contend only within the workgroup; then it adds its non-zero
// counts to the global histogram with one device atomic per bin. The invocations visit `in`
// with a grid stride, so any number of workgroups covers any size.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

/// `kWorkgroup` invocations per (1-D) workgroup.
template <int kBins, int kWorkgroup>
void histogram(dsl::Tensor<const uint32_t> in, dsl::Tensor<uint32_t> hist) {
  dsl::Shared<uint32_t, kBins> counts;
  dsl::Val<uint32_t> local = dsl::local_index();

  // The bins of the shared histogram, spread over the invocations (a comptime loop; only a last,
  // partial round needs a guard).
  auto for_each_bin = [&](auto &&body) {
    for (int first = 0; first < kBins; first += kWorkgroup) {
      dsl::Val<uint32_t> bin = local + first;
      if (first + kWorkgroup <= kBins)
        body(bin);
      else
        dsl::if_(bin < kBins, [&] { body(bin); });
    }
  };

  for_each_bin([&](dsl::Val<uint32_t> bin) { counts[bin] = 0u; });
  dsl::barrier();

  dsl::Val<uint32_t> stride = dsl::num_workgroups().x * kWorkgroup;
  dsl::for_(dsl::global_id().x, in.size(), stride, [&](dsl::Val<uint32_t> i) {
    dsl::Val<uint32_t> value = in(i);
    dsl::if_(value < kBins, [&] { dsl::atomic_add(counts[value], 1u); });
  });
  dsl::barrier();

  for_each_bin([&](dsl::Val<uint32_t> bin) {
    dsl::Val<uint32_t> count = counts[bin];
    dsl::if_(count != 0u, [&] { dsl::atomic_add(hist(bin), count); });
  });
}

static const bool registered_histogram =
    dsl::register_kernel<histogram<256, 256>>(
        "histogram_256", "bins=256,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "hist"}}) &&
    dsl::register_kernel<histogram<1000, 256>>(
        "histogram_1000", "bins=1000,workgroup=256",
        {.workgroup = {256, 1, 1}, .parameter_names = {"in", "hist"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void histogram<256, 256>(dsl::Tensor<const uint32_t>, dsl::Tensor<uint32_t>);
template void histogram<1000, 256>(dsl::Tensor<const uint32_t>, dsl::Tensor<uint32_t>);

} // namespace cubecc::examples
