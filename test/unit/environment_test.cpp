//===- environment_test.cpp - Environment bundles: build, load, hit, miss, and damage ---------===//
//
// Bundles of the example kernels are built in process (environments::build_entries, what
// `cubecc env build` runs), written, mapped and used by a Runtime on interp and vulkan:
//   - every kernel loads without a compilation, and computes what a compiled one computes;
//   - a kernel changed after the bundle was built misses (and is compiled), the rest hit;
//   - a bundle from another cubecc, or a binary from another toolkit, is never used;
//   - a CUBIN from a bundle is the CUBIN a fresh compile makes, and its PTX passes ptxas;
//   - every truncation and every single-byte flip of a small bundle is detected or harmless.
// bundle_trust_test.cpp has damage behind valid checksums, run through the runtime on both
// devices, and files changed under a running application.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/backend.h"
#include "cubecc/codegen/cpu.h"
#include "cubecc/codegen/cuda.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/passes/pass_manager.h"
#include "environment_test_support.h"
#include "spirv_test_support.h"
#include "toolkit_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

using namespace cubecc;

namespace {

using test::build;
using test::expected_axpy;
using test::expected_reduce_sum;
using test::host_axpy;
using test::kInterp;
using test::run_axpy;
using test::run_reduce_sum;
using test::temp_file;
using test::traced_examples;

/// The tests below on each device: interp and vulkan here; cuda and hip where a GPU opens (the
/// bundle is then built for the device's own arch, e.g. cuda:sm_90).
class EnvironmentOnDevice : public testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    std::string device = GetParam();
    try {
      runtime::Runtime::open(device);
    } catch (const runtime::Error &e) {
      if (device == "cuda" || device == "hip")
        GTEST_SKIP() << e.what();
      FAIL() << e.what();
    }
    if (std::string why; device == "cpu" && codegen::llvm_version(&why).empty())
      GTEST_SKIP() << "the LLVM backend is not available: " << why;
  }
  /// The bundle target for this device.
  static std::string target() {
    std::string device = GetParam();
    if (device == "cuda" || device == "hip" || device == "cpu")
      return device + ":" + runtime::Runtime::open(device).info().arch;
    return device;
  }
};

} // namespace

//===- The format --------------------------------------------------------------------------===//

TEST(Bundle, round_trips_every_example_kernel_for_interp_and_vulkan) {
  auto module = traced_examples();
  auto contents = build(*module, {"vulkan", "interp"});
  ASSERT_EQ(contents.entries.size(), module->kernels().size());
  std::string path = temp_file("round_trip.cubeenv");
  environments::write_bundle(path, contents);
  auto bundle = environments::Bundle::open(path);
  EXPECT_EQ(bundle->num_entries(), contents.entries.size());
  EXPECT_EQ(bundle->metadata().created_by, "environment_test");
  EXPECT_EQ(bundle->metadata().targets, (std::vector<std::string>{"vulkan", "interp"}));

  for (const auto &k : module->kernels()) {
    ir::Hash128 hash = ir::structural_hash(*k);
    auto found = bundle->find_kernel(hash, "-O2", std::span(&kInterp, 1));
    ASSERT_EQ(found.outcome, runtime::EnvironmentLookup::Hit) << k->name() << ": " << found.why;
    EXPECT_EQ(found.binary.abi.name, k->name());
    // The IR text is the optimized kernel's module.
    EXPECT_NE(found.binary.bytes.find("kernel @" + k->name()), std::string::npos);
    // Another compile option is another key.
    EXPECT_EQ(bundle->find_kernel(hash, "-O3", std::span(&kInterp, 1)).outcome,
              runtime::EnvironmentLookup::Miss);
  }
  // Decoded entries equal what was written.
  for (size_t i = 0; i < bundle->num_entries(); ++i) {
    std::string error;
    auto entry = bundle->read_entry(i, error);
    ASSERT_TRUE(entry) << error;
    auto original = std::find_if(contents.entries.begin(), contents.entries.end(),
                                 [&](const auto &e) { return e.hash == entry->hash; });
    ASSERT_NE(original, contents.entries.end());
    EXPECT_EQ(entry->name, original->name);
    EXPECT_EQ(entry->configuration, "config of " + original->name);
    EXPECT_EQ(entry->unread_parameters, original->unread_parameters);
    ASSERT_EQ(entry->artifacts.size(), 2u);
    for (size_t a = 0; a < 2; ++a) {
      EXPECT_EQ(entry->artifacts[a].data, original->artifacts[a].data);
      EXPECT_EQ(entry->artifacts[a].target.features, original->artifacts[a].target.features);
      EXPECT_EQ(entry->artifacts[a].abi.workgroup_size, original->artifacts[a].abi.workgroup_size);
      EXPECT_EQ(entry->artifacts[a].abi.params.size(), original->artifacts[a].abi.params.size());
    }
  }
}

// Which parameters a kernel never reads (a tensor whose strides are all unread takes a contiguous
// tensor only): axpy reads x[i] and y[i], never their strides; transpose reads them all.
TEST(Bundle, records_the_parameters_a_kernel_never_reads) {
  auto module = traced_examples();
  auto contents = build(*module, {"interp"});
  auto entry_of = [&](const std::string &name) -> const environments::Entry & {
    auto it = std::find_if(contents.entries.begin(), contents.entries.end(),
                           [&](const auto &e) { return e.name == name; });
    EXPECT_NE(it, contents.entries.end()) << name;
    return *it;
  };
  auto names_of = [](const environments::Entry &e) {
    std::vector<std::string> names;
    for (uint32_t p : e.unread_parameters)
      names.push_back(e.parameter_names.at(p));
    return names;
  };
  std::vector<std::string> axpy = names_of(entry_of("axpy"));
  EXPECT_NE(std::find(axpy.begin(), axpy.end(), "x.stride0"), axpy.end());
  EXPECT_NE(std::find(axpy.begin(), axpy.end(), "y.stride0"), axpy.end());
  for (const std::string &name : names_of(entry_of("transpose_32x8")))
    EXPECT_EQ(name.find(".stride"), std::string::npos) << name;

  // Untrusted: an index past the parameters, or out of order, makes the entry unsound.
  for (std::vector<uint32_t> bad : {std::vector<uint32_t>{1000}, std::vector<uint32_t>{3, 2}}) {
    auto damaged = contents;
    for (auto &e : damaged.entries) {
      if (e.name == "axpy")
        e.unread_parameters = bad;
    }
    auto bundle = environments::Bundle::from_bytes(environments::serialize_bundle(damaged), "bad");
    size_t refused = 0;
    for (size_t i = 0; i < bundle->num_entries(); ++i) {
      std::string error;
      auto entry = bundle->read_entry(i, error);
      EXPECT_TRUE(entry ? entry->name != "axpy"
                        : error.find("'axpy': its unread parameters are not ascending indices") !=
                              std::string::npos)
          << error;
      refused += !entry;
    }
    EXPECT_EQ(refused, 1u);
  }
}

TEST(Bundle, two_entries_with_one_key_are_refused) {
  auto module = traced_examples();
  auto contents = build(*module, {"interp"});
  contents.entries.push_back(contents.entries.front());
  EXPECT_THROW(environments::serialize_bundle(contents), runtime::Error);
}

// Reproducible builds: without SOURCE_DATE_EPOCH and options, the metadata holds no time or
// host, so two serializations of the same contents made at different times are the same bytes.
TEST(Bundle, metadata_records_a_time_and_host_only_when_asked) {
  unsetenv("SOURCE_DATE_EPOCH");
  auto module = traced_examples();
  auto contents = build(*module, {"interp"});
  contents.metadata = environments::current_metadata("environment_test");
  EXPECT_EQ(contents.metadata.created_unix, 0);
  EXPECT_EQ(contents.metadata.created_host, "");
  std::string first = environments::serialize_bundle(contents);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // another second on the clock
  contents.metadata = environments::current_metadata("environment_test");
  EXPECT_EQ(environments::serialize_bundle(contents), first);

  EXPECT_NE(environments::current_metadata("t", {.created_unix = std::nullopt, .record_host = true})
                .created_host,
            "");
  EXPECT_EQ(environments::current_metadata("t", {.created_unix = 86400}).created_unix, 86400);
  setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
  EXPECT_EQ(environments::current_metadata("t").created_unix, 1700000000);
  EXPECT_EQ(environments::current_metadata("t", {.created_unix = 5}).created_unix, 5);
  for (const char *bad : {"12x", "-1", " 5", "99999999999999999999999"}) {
    setenv("SOURCE_DATE_EPOCH", bad, 1);
    EXPECT_THROW(environments::current_metadata("t"), runtime::Error) << bad;
  }
  unsetenv("SOURCE_DATE_EPOCH");
}

// Sharded builds: the shards share the work out with nothing twice and nothing left, and their
// merge, in any order, serializes to the bytes of the whole build.
TEST(Bundle, shards_merged_in_any_order_are_the_whole_build) {
  auto module = traced_examples();
  std::vector<environments::KernelInput> inputs;
  for (const auto &k : module->kernels())
    inputs.push_back({k.get(), "config of " + k->name()});
  environments::BuildOptions options;
  options.targets = {"vulkan", "interp"};
  std::vector<ir::Diagnostic> errors;
  auto whole = environments::build_entries(inputs, options, errors);
  ASSERT_TRUE(whole) << ir::to_string(errors);
  std::vector<environments::BundleContents> shards;
  options.shard_count = 3;
  size_t binaries = 0;
  for (unsigned i = 0; i < 3; ++i) {
    options.shard_index = i;
    auto shard = environments::build_entries(inputs, options, errors);
    ASSERT_TRUE(shard) << ir::to_string(errors);
    EXPECT_FALSE(shard->entries.empty()) << "shard " << i;
    for (const auto &e : shard->entries)
      binaries += e.artifacts.size();
    shards.push_back(std::move(*shard));
  }
  EXPECT_EQ(binaries, 2 * module->kernels().size());
  const std::string expected = environments::serialize_bundle(*whole);
  for (const auto &order : {std::array{0, 1, 2}, std::array{2, 0, 1}, std::array{1, 2, 0}}) {
    environments::BundleContents merged;
    for (int i : order)
      EXPECT_TRUE(environments::merge_contents(merged, shards[i]).empty());
    EXPECT_EQ(environments::serialize_bundle(merged), expected) << order[0] << order[1] << order[2];
  }
  options.shard_index = 3;
  EXPECT_THROW(environments::build_entries(inputs, options, errors), runtime::Error);
}

TEST(Bundle, merge_joins_binaries_and_replaces_tuning_records) {
  auto module = traced_examples();
  auto interp = build(*module, {"interp"});
  auto vulkan = build(*module, {"vulkan"});
  vulkan.tuning.push_back({"matmul|m=128|dev", R"({"winner":"a"})"});
  environments::BundleContents merged = interp;
  EXPECT_TRUE(environments::merge_contents(merged, vulkan).empty());
  ASSERT_EQ(merged.entries.size(), module->kernels().size());
  for (const auto &e : merged.entries)
    EXPECT_EQ(e.artifacts.size(), 2u) << e.name;
  environments::BundleContents retuned;
  retuned.tuning.push_back({"matmul|m=128|dev", R"({"winner":"b"})"});
  auto notes = environments::merge_contents(merged, retuned);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("replaced"), std::string::npos);
  auto bundle = environments::Bundle::from_bytes(environments::serialize_bundle(merged), "merged");
  EXPECT_EQ(bundle->find_tuning("matmul|m=128|dev"),
            std::optional<std::string>(R"({"winner":"b"})"));
  EXPECT_EQ(bundle->find_tuning("matmul|m=256|dev"), std::nullopt);
  EXPECT_EQ(bundle->contents().entries.size(), module->kernels().size());
}

TEST(Bundle, cubins_are_those_of_a_fresh_compile_and_the_ptx_passes_ptxas) {
  std::string why;
  if (codegen::nvrtc_version(&why).empty())
    GTEST_SKIP() << why;
  auto module = traced_examples();
  auto contents = build(*module, {"cuda:sm_80", "cuda:sm_90"});
  auto bundle = environments::Bundle::from_bytes(environments::serialize_bundle(contents), "cuda");
  size_t checked = 0;
  for (const auto &k : module->kernels()) {
    auto optimized = ir::copy_kernel(*k);
    ASSERT_TRUE(passes::optimize(*optimized, 2).empty());
    std::vector<ir::Diagnostic> errors;
    auto fresh = codegen::compile_cuda(*optimized->kernels().front(), {"sm_80", "sm_90"}, errors);
    ASSERT_TRUE(fresh) << ir::to_string(errors);
    std::string toolkit = codegen::cuda_toolkit(); // what a CUDA device asks for
    for (const auto &cubin : fresh->cubins) {
      runtime::BinaryTarget want{"cuda:" + cubin.arch, "cubin", "", toolkit};
      auto found = bundle->find_kernel(ir::structural_hash(*k), "-O2", std::span(&want, 1));
      ASSERT_EQ(found.outcome, runtime::EnvironmentLookup::Hit) << found.why;
      EXPECT_EQ(found.binary.bytes, cubin.bytes) << k->name() << " " << cubin.arch;
      EXPECT_EQ(found.binary.bytes.substr(0, 4), "\x7f"
                                                 "ELF");
      EXPECT_EQ(found.binary.entry, fresh->source.entry);
      ++checked;
    }
    // A GPU newer than every CUBIN (a device that wants sm_120 first) falls back to the PTX.
    runtime::BinaryTarget newer[] = {{"cuda:sm_120", "cubin", "", toolkit},
                                     {"cuda:compute_80", "ptx", "", toolkit}};
    auto ptx = bundle->find_kernel(ir::structural_hash(*k), "-O2", newer);
    ASSERT_EQ(ptx.outcome, runtime::EnvironmentLookup::Hit) << ptx.why;
    EXPECT_EQ(ptx.binary.target.format, "ptx");
    EXPECT_EQ(ptx.binary.bytes, fresh->ptx);
    EXPECT_EQ(test::ptxas(std::string(ptx.binary.bytes), k->name()), "");
  }
  EXPECT_EQ(checked, 2 * module->kernels().size());
}

TEST(Bundle, a_binary_from_another_toolkit_is_rejected_naming_both) {
  environments::BundleContents contents;
  environments::Entry entry;
  entry.hash = {1, 2};
  entry.options = "-O2";
  entry.name = "k";
  environments::Artifact cubin;
  cubin.target = {"cuda:sm_90", "cubin", "", "NVRTC 12.0"};
  cubin.abi.name = "k";
  cubin.data = "\x7f"
               "ELF...";
  entry.artifacts.push_back(cubin);
  contents.entries.push_back(entry);
  auto bundle = environments::Bundle::from_bytes(environments::serialize_bundle(contents), "b");
  runtime::BinaryTarget newer{"cuda:sm_90", "cubin", "", "NVRTC 13.0"};
  auto found = bundle->find_kernel({1, 2}, "-O2", std::span(&newer, 1));
  EXPECT_EQ(found.outcome, runtime::EnvironmentLookup::Rejected);
  EXPECT_NE(found.why.find("NVRTC 12.0"), std::string::npos) << found.why;
  EXPECT_NE(found.why.find("NVRTC 13.0"), std::string::npos) << found.why;
  // A runtime without a compiler of its own (toolkit "") takes the binary as built.
  runtime::BinaryTarget any{"cuda:sm_90", "cubin", "", ""};
  EXPECT_EQ(bundle->find_kernel({1, 2}, "-O2", std::span(&any, 1)).outcome,
            runtime::EnvironmentLookup::Hit);
  // A binary for another arch is not one for this device.
  runtime::BinaryTarget sm80{"cuda:sm_80", "cubin", "", ""};
  EXPECT_EQ(bundle->find_kernel({1, 2}, "-O2", std::span(&sm80, 1)).outcome,
            runtime::EnvironmentLookup::Miss);
}

// SPIR-V is taken where the device has what it relies on (SpirvKernel::relies_on, recorded as a
// fingerprint): from any Vulkan target, the best for the device first; never when it relies on
// something the device lacks, and never from a record cubecc cannot have written.
TEST(Bundle, spirv_is_taken_where_the_device_has_what_it_relies_on) {
  const codegen::TargetFeatures baseline = codegen::TargetFeatures::vulkan_baseline();
  const codegen::TargetFeatures nvidia = codegen::TargetFeatures::vulkan_nvidia();
  auto record = [](std::string_view workgroup, std::string_view op,
                   const codegen::TargetFeatures &features) {
    return test::spirv_relies_on(test::f32_kernel_text(fmt::format("workgroup({})", workgroup),
                                                       fmt::format("    %r = {} : f32\n", op)),
                                 features)
        .fingerprint();
  };
  // An fma: exact through f64 for lavapipe, GLSL's fused Fma for an NVIDIA GPU.
  const std::string fma_lavapipe = record("64, 1, 1", "fma %v, %v, %v", baseline);
  const std::string fma_nvidia = record("64, 1, 1", "fma %v, %v, %v", nvidia);
  // Subgroups across two rows: consecutive on an NVIDIA GPU.
  const std::string rows_nvidia = record("32, 2, 1", "subgroup.sum %v", nvidia);

  auto bundle_of = [](std::vector<std::pair<std::string, std::string>> artifacts) {
    environments::BundleContents contents;
    contents.metadata = environments::current_metadata("");
    environments::Entry entry;
    entry.hash = {1, 2};
    entry.options = "-O2";
    entry.name = "k";
    for (auto &[target, features] : artifacts) {
      environments::Artifact a;
      a.target = {target, "spirv", features, ""};
      a.abi.name = "k";
      a.data = target == "vulkan" ? "base" : "gpu!"; // one SPIR-V word, to tell them apart
      entry.artifacts.push_back(a);
    }
    contents.entries.push_back(entry);
    return environments::Bundle::from_bytes(environments::serialize_bundle(contents), "b");
  };
  codegen::TargetFeatures lavapipe_device = baseline;
  lavapipe_device.max_shared_bytes = 65536; // limits are the loader's business, not the lookup's
  codegen::TargetFeatures gpu_device = nvidia;
  gpu_device.max_shared_bytes = 101376;
  gpu_device.max_param_block_bytes = 256;
  runtime::BinaryTarget lavapipe{"vulkan", "spirv", lavapipe_device.fingerprint(), ""};
  runtime::BinaryTarget gpu{"vulkan", "spirv", gpu_device.fingerprint(), ""};

  // Both targets' fma in the bundle, in either order: each device takes its own.
  for (bool nvidia_first : {false, true}) {
    std::vector<std::pair<std::string, std::string>> both = {{"vulkan", fma_lavapipe},
                                                             {"vulkan:nvidia", fma_nvidia}};
    if (nvidia_first)
      std::swap(both[0], both[1]);
    auto bundle = bundle_of(both);
    auto on_lavapipe = bundle->find_kernel({1, 2}, "-O2", std::span(&lavapipe, 1));
    ASSERT_EQ(on_lavapipe.outcome, runtime::EnvironmentLookup::Hit) << on_lavapipe.why;
    EXPECT_EQ(on_lavapipe.binary.target.target, "vulkan");
    EXPECT_EQ(on_lavapipe.binary.bytes, "base");
    auto on_gpu = bundle->find_kernel({1, 2}, "-O2", std::span(&gpu, 1));
    ASSERT_EQ(on_gpu.outcome, runtime::EnvironmentLookup::Hit) << on_gpu.why;
    EXPECT_EQ(on_gpu.binary.target.target, "vulkan:nvidia");
    EXPECT_EQ(on_gpu.binary.target.features, fma_nvidia);
    EXPECT_EQ(on_gpu.binary.bytes, "gpu!");
  }
  // The baseline's SPIR-V alone runs on the GPU too.
  EXPECT_EQ(
      bundle_of({{"vulkan", fma_lavapipe}})->find_kernel({1, 2}, "-O2", std::span(&gpu, 1)).outcome,
      runtime::EnvironmentLookup::Hit);

  auto refused = bundle_of({{"vulkan:nvidia", fma_nvidia}})
                     ->find_kernel({1, 2}, "-O2", std::span(&lavapipe, 1));
  EXPECT_EQ(refused.outcome, runtime::EnvironmentLookup::Rejected);
  EXPECT_EQ(refused.why, "its vulkan:nvidia binary relies on what this device lacks: a fused fma");
  refused = bundle_of({{"vulkan:nvidia", rows_nvidia}})
                ->find_kernel({1, 2}, "-O2", std::span(&lavapipe, 1));
  EXPECT_EQ(refused.outcome, runtime::EnvironmentLookup::Rejected);
  EXPECT_EQ(refused.why, "its vulkan:nvidia binary relies on what this device lacks: subgroups "
                         "of consecutive invocations");

  // Records cubecc cannot have written: rejected as such, never blamed on the device.
  std::string unknown_shape = fma_lavapipe;
  unknown_shape.replace(unknown_shape.find('.', 21), 2, // a shape bit past the last
                        fmt::format(".{}", uint64_t{1} << ir::matrix_shapes().size()));
  for (std::string record :
       {std::string("0101"), std::string(), std::string(300, '1'), unknown_shape}) {
    auto found =
        bundle_of({{"vulkan", record}})->find_kernel({1, 2}, "-O2", std::span(&lavapipe, 1));
    EXPECT_EQ(found.outcome, runtime::EnvironmentLookup::Rejected) << record;
    EXPECT_EQ(found.why,
              "its vulkan binary is not one cubecc writes (a damaged or foreign bundle): "
              "rebuild it")
        << record;
  }
  // "vulkan" takes its variants, not targets that merely start alike.
  EXPECT_EQ(bundle_of({{"vulkanx", fma_lavapipe}})
                ->find_kernel({1, 2}, "-O2", std::span(&lavapipe, 1))
                .outcome,
            runtime::EnvironmentLookup::Miss);
}

TEST(Bundle, a_bundle_of_tuning_records_only_opens_whatever_their_sizes) {
  // `cubecc tune` writes bundles without kernels; the empty entry table lands wherever the
  // strings before it end (found by the main job: a misaligned empty table was refused).
  for (size_t length = 1; length <= 24; ++length) {
    environments::BundleContents contents;
    contents.metadata = environments::current_metadata(std::string(length, 'c'));
    contents.tuning.push_back({std::string(length, 'k'), std::string(length + 3, 'r')});
    auto bundle = environments::Bundle::from_bytes(environments::serialize_bundle(contents),
                                                   "records.cubeenv");
    EXPECT_EQ(bundle->num_entries(), 0u);
    EXPECT_EQ(bundle->find_tuning(std::string(length, 'k')), std::string(length + 3, 'r'));
  }
}

TEST(Bundle, lookups_from_many_threads_agree) {
  auto module = traced_examples();
  auto bundle = environments::Bundle::from_bytes(
      environments::serialize_bundle(build(*module, {"interp"})), "threads");
  std::atomic<size_t> hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (const auto &k : module->kernels())
        if (bundle->find_kernel(ir::structural_hash(*k), "-O2", std::span(&kInterp, 1)).outcome ==
            runtime::EnvironmentLookup::Hit)
          ++hits;
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(hits.load(), 8 * module->kernels().size());
}

//===- The runtime with a bundle ------------------------------------------------------------===//

TEST_P(EnvironmentOnDevice, every_example_kernel_loads_without_compiling_and_computes_the_same) {
  auto module = traced_examples();
  std::string path = temp_file(std::string("examples-") + GetParam() + ".cubeenv");
  environments::write_bundle(path, build(*module, {target()}));

  runtime::Runtime with = runtime::Runtime::open(GetParam());
  with.use_environment(path, {.fallback_to_jit = false});
  std::vector<runtime::KernelHandle> handles;
  for (const auto &k : module->kernels())
    handles.push_back(with.load(*k));
  EXPECT_EQ(with.cache_statistics().compiles, 0u);
  EXPECT_EQ(with.environment_statistics().hits, module->kernels().size());
  EXPECT_EQ(with.environment_statistics().misses, 0u);

  runtime::Runtime without = runtime::Runtime::open(GetParam());
  const ir::Kernel *axpy = module->find_kernel("axpy");
  ASSERT_TRUE(axpy);
  runtime::KernelHandle jit = without.load(*axpy);
  EXPECT_EQ(without.cache_statistics().compiles, 1u);
  runtime::KernelHandle bundled = with.load(*axpy); // from the in-process cache now
  EXPECT_EQ(with.cache_statistics().compiles, 0u);
  std::vector<float> from_bundle = run_axpy(with, bundled);
  EXPECT_EQ(from_bundle, run_axpy(without, jit));
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.25f * float(i);
    y[i] = 1.0f - float(i);
  }
  EXPECT_EQ(from_bundle, host_axpy(x, y, 3.0f));
}

TEST_P(EnvironmentOnDevice, a_kernel_changed_after_the_build_misses_and_the_rest_hit) {
  auto module = traced_examples();
  std::string path = temp_file(std::string("before-change-") + GetParam() + ".cubeenv");
  environments::write_bundle(path, build(*module, {target()}));

  // The application is rebuilt with one kernel changed (axpy's workgroup size): same name and
  // parameters, different code.
  auto changed = ir::copy_kernel(*module->find_kernel("axpy"));
  ir::Kernel &axpy = *changed->kernels().front();
  axpy.set_workgroup_size({64, 1, 1});
  runtime::Runtime rt = runtime::Runtime::open(GetParam());
  rt.use_environment(path);
  for (const auto &k : module->kernels())
    if (k->name() != "axpy")
      rt.load(*k);
  runtime::KernelHandle handle = rt.load(axpy);
  EXPECT_EQ(rt.environment_statistics().hits, module->kernels().size() - 1);
  EXPECT_EQ(rt.environment_statistics().misses, 1u);
  EXPECT_EQ(rt.cache_statistics().compiles, 1u);
  EXPECT_EQ(handle.abi().workgroup_size[0], 64u); // the new kernel, not the stale binary
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.25f * float(i);
    y[i] = 1.0f - float(i);
  }
  EXPECT_EQ(run_axpy(rt, handle), host_axpy(x, y, 3.0f));

  // With compiling off, the changed kernel is an error that names it.
  runtime::Runtime strict = runtime::Runtime::open(GetParam());
  strict.use_environment(path, {.fallback_to_jit = false});
  try {
    strict.load(axpy);
    ADD_FAILURE() << "a miss loaded with compiling off";
  } catch (const runtime::Error &e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'axpy'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not there"), std::string::npos) << e.what();
  }
}

TEST_P(EnvironmentOnDevice, a_bundle_from_another_cubecc_is_never_used) {
  auto module = traced_examples();
  auto contents = build(*module, {target()});
  contents.metadata.cubecc_version = "0.0.1-elsewhere";
  std::string path = temp_file(std::string("old-") + GetParam() + ".cubeenv");
  environments::write_bundle(path, contents);
  runtime::Runtime rt = runtime::Runtime::open(GetParam());
  rt.use_environment(path);
  for (const auto &k : module->kernels())
    rt.load(*k);
  EXPECT_EQ(rt.environment_statistics().hits, 0u);
  EXPECT_EQ(rt.environment_statistics().rejected, module->kernels().size());
  EXPECT_EQ(rt.cache_statistics().compiles, module->kernels().size());

  runtime::Runtime strict = runtime::Runtime::open(GetParam());
  strict.use_environment(path, {.fallback_to_jit = false});
  try {
    strict.load(*module->kernels().front());
    ADD_FAILURE() << "a bundle of another cubecc was used";
  } catch (const runtime::Error &e) {
    EXPECT_NE(std::string(e.what()).find("0.0.1-elsewhere"), std::string::npos) << e.what();
  }
}

//===- Kernels by name, without the library -----------------------------------------------===//

namespace {

/// A bundle of every kernel of `module` recorded as library "examples", as `cubecc env build
/// libexamples.so` makes it; `build_id` receives the library's build.
environments::BundleContents build_library(const ir::Module &module,
                                           const std::vector<std::string> &targets,
                                           std::string &build_id) {
  std::vector<environments::KernelInput> inputs;
  for (const auto &k : module.kernels())
    inputs.push_back({k.get(), "config of " + k->name(), "examples", ""});
  build_id = environments::library_build_of(inputs);
  for (auto &input : inputs)
    input.library_build = build_id;
  environments::BuildOptions options;
  options.targets = targets;
  std::vector<ir::Diagnostic> errors;
  auto contents = environments::build_entries(inputs, options, errors);
  EXPECT_TRUE(contents) << ir::to_string(errors);
  if (!contents)
    return {};
  contents->metadata = environments::current_metadata("environment_test");
  contents->metadata.targets = targets;
  return std::move(*contents);
}

/// The kind of the Error `call` throws (Internal, with a test failure, if it throws none), and its
/// message in `message`.
template <class F> runtime::ErrorKind error_kind_of(F &&call, std::string &message) {
  try {
    call();
  } catch (const runtime::Error &e) {
    message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no Error";
  return runtime::ErrorKind::Internal;
}

} // namespace

TEST_P(EnvironmentOnDevice, a_kernel_by_name_runs_from_the_bundle_alone_without_tracing) {
  auto module = traced_examples();
  std::string build_id;
  std::string path = temp_file(std::string("named-") + GetParam() + ".cubeenv");
  environments::write_bundle(path, build_library(*module, {target()}, build_id));

  runtime::Runtime rt = runtime::Runtime::open(GetParam());
  rt.use_environment(path, {.fallback_to_jit = false});
  runtime::KernelHandle axpy = rt.kernel_from_environment("examples", "axpy", "config of axpy");
  EXPECT_EQ(run_axpy(rt, axpy), expected_axpy());
  runtime::KernelHandle reduce =
      rt.kernel_from_environment("examples", "reduce_sum", "config of reduce_sum");
  EXPECT_EQ(run_reduce_sum(rt, reduce), expected_reduce_sum());
  EXPECT_EQ(rt.cache_statistics().compiles, 0u);
  EXPECT_EQ(rt.cache_statistics().traces, 0u);
  EXPECT_EQ(rt.environment_statistics().hits, 2u);
  // The handle is the traced kernel's: its hash, and the launch checks name its parameters.
  EXPECT_EQ(axpy.hash(), ir::structural_hash(*module->find_kernel("axpy")).hex());
  // A second request is the in-process cache's.
  rt.kernel_from_environment("examples", "axpy", "config of axpy");
  EXPECT_EQ(rt.environment_statistics().hits, 2u);
  EXPECT_EQ(rt.cache_statistics().hits, 1u);
  std::string message;
  runtime::Buffer wrong = rt.upload(std::vector<int32_t>(16));
  EXPECT_EQ(error_kind_of(
                [&] {
                  rt.launch(axpy, {1, 1, 1}, wrong, 16u, 1u, wrong, 16u, 1u, 1.0f);
                },
                message),
            runtime::ErrorKind::InvalidArgument);
  const std::string first = module->find_kernel("axpy")->parameter(0)->name();
  ASSERT_FALSE(first.empty());
  EXPECT_NE(message.find("parameter 0 (%" + first + ": "), std::string::npos) << message;
  EXPECT_EQ(rt.environment_library_build("examples", "axpy", "config of axpy"), build_id);
}

TEST_P(EnvironmentOnDevice, a_kernel_by_name_that_is_not_there_is_not_found_naming_what_is) {
  auto module = traced_examples();
  std::string build_id, message;
  std::string path = temp_file(std::string("named-missing-") + GetParam() + ".cubeenv");
  environments::write_bundle(path, build_library(*module, {target()}, build_id));
  runtime::Runtime rt = runtime::Runtime::open(GetParam());
  EXPECT_EQ(error_kind_of([&] { rt.kernel_from_environment("examples", "axpy", ""); }, message),
            runtime::ErrorKind::InvalidArgument); // no environment yet
  EXPECT_NE(message.find("use_environment"), std::string::npos) << message;
  rt.use_environment(path, {.fallback_to_jit = false});
  EXPECT_EQ(
      error_kind_of([&] { rt.kernel_from_environment("examples", "axpy", "width=3"); }, message),
      runtime::ErrorKind::NotFound);
  EXPECT_NE(message.find("no kernel 'axpy' (configuration 'width=3') of library 'examples'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("'axpy' (configuration 'config of axpy', -O2)"), std::string::npos)
      << message;
  EXPECT_EQ(error_kind_of([&] { rt.kernel_from_environment("other", "axpy", ""); }, message),
            runtime::ErrorKind::NotFound);
  EXPECT_NE(message.find("its libraries are 'examples'"), std::string::npos) << message;
  EXPECT_EQ(rt.cache_statistics().compiles, 0u);
}

TEST(NamedKernels, a_bundle_for_another_device_cannot_serve_the_kernel_by_name) {
  auto module = traced_examples();
  std::string build_id, message;
  std::string path = temp_file("named-vulkan-only.cubeenv");
  environments::write_bundle(path, build_library(*module, {"vulkan"}, build_id));
  runtime::Runtime rt = runtime::Runtime::open("interp");
  rt.use_environment(path, {.fallback_to_jit = false});
  EXPECT_EQ(error_kind_of([&] { rt.kernel_from_environment("examples", "axpy", "config of axpy"); },
                          message),
            runtime::ErrorKind::Environment);
  EXPECT_NE(message.find("cannot run on this device (interp"), std::string::npos) << message;
}

TEST(NamedKernels, the_index_name_table_finds_every_kernel_and_a_lying_one_changes_nothing) {
  // 300 kernels by (library, name, configuration, options), in fours alike but for the library
  // or the options.
  auto module = traced_examples();
  std::string build_id;
  environments::BundleContents built = build_library(*module, {"interp"}, build_id);
  const environments::Entry *axpy = nullptr;
  for (const environments::Entry &e : built.entries)
    if (e.name == "axpy")
      axpy = &e;
  ASSERT_NE(axpy, nullptr);
  environments::BundleContents contents;
  contents.metadata = built.metadata;
  struct Wanted {
    std::string library, configuration, options;
    ir::Hash128 hash;
  };
  std::vector<Wanted> wanted;
  for (uint64_t i = 0; i < 300; ++i) {
    environments::Entry e = *axpy;
    e.hash = {i + 1, 0x5eed};
    e.library = i % 2 == 0 ? "examples" : "other";
    e.configuration = fmt::format("c{}", i / 4);
    e.options = i / 2 % 2 == 0 ? "-O2" : "-O0";
    wanted.push_back({e.library, e.configuration, e.options, e.hash});
    contents.entries.push_back(std::move(e));
  }
  const std::string bytes = environments::serialize_bundle(contents);
  auto bundle = environments::Bundle::from_bytes(bytes, "names.cubeenv");
  for (const Wanted &w : wanted) {
    runtime::NamedKernelLookup found =
        bundle->find_named_kernel(w.library, "axpy", w.configuration, w.options, {&kInterp, 1});
    EXPECT_EQ(found.lookup.outcome, runtime::EnvironmentLookup::Hit) << found.lookup.why;
    EXPECT_EQ(found.hash, w.hash) << w.library << " " << w.configuration << " " << w.options;
  }
  EXPECT_EQ(
      bundle->find_named_kernel("examples", "axpy", "c1000", "-O2", {&kInterp, 1}).lookup.outcome,
      runtime::EnvironmentLookup::Miss);

  // The name table as docs/bundle-format.md says: {XXH3-64 of "library\0kernel\0configuration\0
  // options\0", the entry's position, 0}.
  const Wanted &w = wanted[7];
  const std::string named =
      w.library + '\0' + "axpy" + '\0' + w.configuration + '\0' + w.options + '\0';
  const uint64_t key = XXH3_64bits(named.data(), named.size());
  size_t at = std::string::npos;
  for (size_t i = 0; i + 16 <= bytes.size(); i += 8)
    if (std::memcmp(bytes.data() + i, &key, 8) == 0) {
      EXPECT_EQ(at, std::string::npos) << "the key is in the file twice";
      at = i;
    }
  ASSERT_NE(at, std::string::npos) << "the name table does not hold the key the docs give";
  uint32_t entry = 0, reserved = 1;
  std::memcpy(&entry, bytes.data() + at + 8, 4);
  std::memcpy(&reserved, bytes.data() + at + 12, 4);
  EXPECT_EQ(reserved, 0u);
  std::string error;
  std::optional<environments::Entry> pointed = bundle->read_entry(entry, error);
  ASSERT_TRUE(pointed) << error;
  EXPECT_EQ(pointed->hash, w.hash);

  // Damage behind valid checksums: a position past the entries, or a reserved field in use, is
  // refused at open; a name pointing at another kernel's entry only costs the scan.
  auto patched = [&](size_t offset, uint32_t value) {
    std::string copy = bytes;
    std::memcpy(copy.data() + offset, &value, 4);
    return environments::reseal_for_testing(std::move(copy));
  };
  std::string message;
  try {
    environments::Bundle::from_bytes(patched(at + 8, 300), "names.cubeenv");
    ADD_FAILURE() << "a name pointing past the entries was accepted";
  } catch (const runtime::Error &e) {
    message = e.what();
  }
  EXPECT_NE(message.find("refers to entry 300 of 300"), std::string::npos) << message;
  EXPECT_THROW(environments::Bundle::from_bytes(patched(at + 12, 1), "names.cubeenv"),
               runtime::Error);
  auto lying = environments::Bundle::from_bytes(patched(at + 8, entry == 0 ? 1 : 0), "lying");
  runtime::NamedKernelLookup found =
      lying->find_named_kernel(w.library, "axpy", w.configuration, w.options, {&kInterp, 1});
  EXPECT_EQ(found.lookup.outcome, runtime::EnvironmentLookup::Hit) << found.lookup.why;
  EXPECT_EQ(found.hash, w.hash);
}

TEST(NamedKernels, a_damaged_entry_that_may_be_the_kernel_is_an_environment_error_not_a_miss) {
  auto module = traced_examples();
  std::string build_id, message;
  std::string bytes = environments::serialize_bundle(build_library(*module, {"interp"}, build_id));
  auto intact = environments::Bundle::from_bytes(bytes, "intact");
  size_t axpy = intact->num_entries();
  for (size_t i = 0; i < intact->num_entries(); ++i) {
    std::string error;
    if (auto e = intact->read_entry(i, error); e && e->name == "axpy")
      axpy = i;
  }
  ASSERT_LT(axpy, intact->num_entries());
  bytes[intact->entry_offset(axpy) + intact->entry_bytes(axpy) / 2] ^= 0x20; // not resealed
  std::string path = temp_file("named-damaged.cubeenv");
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  runtime::Runtime rt = runtime::Runtime::open("interp");
  rt.use_environment(path, {.fallback_to_jit = false});
  EXPECT_EQ(error_kind_of([&] { rt.kernel_from_environment("examples", "axpy", "config of axpy"); },
                          message),
            runtime::ErrorKind::Environment);
  EXPECT_NE(message.find("no sound kernel 'axpy'"), std::string::npos) << message;
  EXPECT_NE(message.find("is damaged"), std::string::npos) << message;
  EXPECT_NE(message.find("it may have been that one; rebuild the bundle"), std::string::npos)
      << message;
  // The others are served as before.
  EXPECT_NO_THROW(rt.kernel_from_environment("examples", "reduce_sum", "config of reduce_sum"));
}

TEST(NamedKernels, the_library_build_changes_with_any_kernel_and_not_with_their_order) {
  auto module = traced_examples();
  std::vector<environments::KernelInput> inputs;
  for (const auto &k : module->kernels())
    inputs.push_back({k.get(), "c", "examples", ""});
  std::string id = environments::library_build_of(inputs);
  EXPECT_EQ(id.size(), 32u);
  std::vector<environments::KernelInput> reversed(inputs.rbegin(), inputs.rend());
  EXPECT_EQ(environments::library_build_of(reversed), id);
  auto changed = ir::copy_kernel(*module->find_kernel("axpy"));
  changed->kernels().front()->set_workgroup_size({64, 1, 1});
  for (auto &input : inputs)
    if (input.kernel->name() == "axpy")
      input.kernel = changed->kernels().front().get();
  EXPECT_NE(environments::library_build_of(inputs), id);
  EXPECT_EQ(environments::library_name_of_input("build/libexamples.so"), "examples");
  EXPECT_EQ(environments::library_name_of_input("kernels/axpy.cpp"), "axpy");
}

INSTANTIATE_TEST_SUITE_P(Devices, EnvironmentOnDevice,
                         testing::Values("interp", "vulkan", "cpu", "cuda", "hip"),
                         [](const auto &info) { return std::string(info.param); });

TEST(RuntimeEnvironment, CUBECC_ENV_names_the_bundle_Runtime_open_uses) {
  auto module = traced_examples();
  std::string path = temp_file("from-env-var.cubeenv");
  environments::write_bundle(path, build(*module, {"interp"}));
  setenv("CUBECC_ENV", path.c_str(), 1);
  runtime::Runtime rt = runtime::Runtime::open("interp");
  unsetenv("CUBECC_ENV");
  ASSERT_NE(rt.environment(), nullptr);
  EXPECT_EQ(rt.environment()->name(), path);
  rt.load(*module->kernels().front());
  EXPECT_EQ(rt.environment_statistics().hits, 1u);
  EXPECT_EQ(rt.cache_statistics().compiles, 0u);
}

//===- Damage --------------------------------------------------------------------------------===//

TEST(BundleDamage, a_missing_file_or_another_kind_of_file_is_a_clear_error) {
  try {
    environments::Bundle::open(temp_file("no-such.cubeenv"));
    ADD_FAILURE() << "opened a missing file";
  } catch (const runtime::Error &e) {
    EXPECT_NE(std::string(e.what()).find("no-such.cubeenv: cannot open"), std::string::npos)
        << e.what();
  }
  std::string text = temp_file("text.cubeenv");
  std::ofstream(text) << "module @m {\n}\n" << std::string(100, ' ');
  try {
    environments::Bundle::open(text);
    ADD_FAILURE() << "opened a text file";
  } catch (const runtime::Error &e) {
    EXPECT_NE(std::string(e.what()).find("not an environment bundle"), std::string::npos)
        << e.what();
  }
  // A runtime told to use it runs without it (a warning), or refuses when it must never compile.
  runtime::Runtime rt = runtime::Runtime::open("interp");
  rt.use_environment(text);
  EXPECT_EQ(rt.environment(), nullptr);
  auto module = traced_examples();
  rt.load(*module->kernels().front());
  EXPECT_EQ(rt.cache_statistics().compiles, 1u);
  try {
    rt.use_environment(text, {.fallback_to_jit = false});
    ADD_FAILURE() << "a strict runtime took a text file as its environment";
  } catch (const runtime::Error &e) {
    EXPECT_NE(std::string(e.what()).find("text.cubeenv: not an environment bundle"),
              std::string::npos)
        << e.what();
  }
}

namespace {

/// A small bundle: axpy for interp, and a tuning record.
std::string small_bundle() {
  auto module = traced_examples();
  auto axpy = ir::copy_kernel(*module->find_kernel("axpy"));
  auto contents = build(*axpy, {"interp"});
  contents.tuning.push_back({"axpy|n=1024|interp", R"({"winner":"width=1"})"});
  return environments::serialize_bundle(contents);
}

} // namespace

TEST(BundleDamage, every_truncation_is_an_error_at_open) {
  std::string bytes = small_bundle();
  for (size_t size = 0; size < bytes.size(); ++size)
    EXPECT_THROW(environments::Bundle::from_bytes(std::string_view(bytes).substr(0, size), "cut"),
                 runtime::Error)
        << "truncated to " << size << " of " << bytes.size() << " bytes";
  // Extended is damage too.
  EXPECT_THROW(environments::Bundle::from_bytes(bytes + "x", "long"), runtime::Error);
}

TEST(BundleDamage, every_single_byte_flip_is_detected) {
  std::string bytes = small_bundle();
  auto good = environments::Bundle::from_bytes(bytes, "good");
  auto module = traced_examples();
  ir::Hash128 hash = ir::structural_hash(*module->find_kernel("axpy"));
  auto reference = good->find_kernel(hash, "-O2", std::span(&kInterp, 1));
  ASSERT_EQ(reference.outcome, runtime::EnvironmentLookup::Hit);
  std::string reference_bytes(reference.binary.bytes);

  size_t at_open = 0, at_lookup = 0, harmless = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0xff);
    std::shared_ptr<const environments::Bundle> bundle;
    try {
      bundle = environments::Bundle::from_bytes(flipped, "flipped");
    } catch (const runtime::Error &) {
      ++at_open;
      continue;
    }
    auto found = bundle->find_kernel(hash, "-O2", std::span(&kInterp, 1));
    if (found.outcome != runtime::EnvironmentLookup::Hit) {
      EXPECT_EQ(found.outcome, runtime::EnvironmentLookup::Rejected) << "byte " << i;
      ++at_lookup;
      continue;
    }
    // Used: it must be exactly the original kernel, launch metadata included.
    EXPECT_EQ(found.binary.bytes, reference_bytes) << "byte " << i;
    EXPECT_EQ(found.binary.abi.workgroup_size, reference.binary.abi.workgroup_size);
    EXPECT_EQ(found.binary.abi.param_block_bytes, reference.binary.abi.param_block_bytes);
    EXPECT_EQ(found.binary.abi.num_buffers, reference.binary.abi.num_buffers);
    EXPECT_EQ(bundle->find_tuning("axpy|n=1024|interp"), good->find_tuning("axpy|n=1024|interp"));
    ++harmless;
  }
  std::cout << "[          ] " << bytes.size() << " flips: " << at_open << " detected at open, "
            << at_lookup << " at lookup, " << harmless << " harmless\n";
  EXPECT_EQ(at_open + at_lookup + harmless, bytes.size());
  EXPECT_GT(at_lookup, 0u); // the entry's own checksum caught some
  EXPECT_EQ(harmless, 0u);  // the padding is checked too: no byte changes unnoticed
}

TEST(BundleDamage, every_single_byte_flip_behind_recomputed_checksums_is_handled) {
  // The checks behind the checksums (bounds, order, structure, launch metadata) on every flip of
  // a bundle whose checksums are then made to match: errors or rejections, never a crash (this
  // runs under ASan and UBSan in CI). Flips inside a binary's bytes go unnoticed by design: only
  // the checksum guards them.
  std::string bytes = small_bundle();
  auto module = traced_examples();
  ir::Hash128 hash = ir::structural_hash(*module->find_kernel("axpy"));
  size_t at_open = 0, at_lookup = 0, opened = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0xff);
    std::shared_ptr<const environments::Bundle> bundle;
    try {
      bundle = environments::Bundle::from_bytes(environments::reseal_for_testing(flipped), "x");
    } catch (const runtime::Error &) {
      ++at_open;
      continue;
    }
    ++opened;
    auto found = bundle->find_kernel(hash, "-O2", std::span(&kInterp, 1));
    if (found.outcome != runtime::EnvironmentLookup::Hit)
      ++at_lookup;
    for (size_t e = 0; e < bundle->num_entries(); ++e) {
      std::string error;
      bundle->read_entry(e, error);
    }
    bundle->tuning_records();
  }
  std::cout << "[          ] " << bytes.size() << " resealed flips: " << at_open
            << " refused at open, " << at_lookup << " at lookup, " << opened - at_lookup
            << " found\n";
  EXPECT_GT(at_open, 0u);
  EXPECT_GT(at_lookup, 0u);
  // Resealing an undamaged bundle changes nothing.
  EXPECT_EQ(environments::reseal_for_testing(bytes), bytes);
}

TEST(BundleBuilder, parse_targets_refuses_an_over_long_name_before_matching_it) {
  // A megabyte-long name used to reach std::regex, whose matcher recurses per character.
  std::string error;
  const std::vector<std::string> lists{"cuda:sm_" + std::string(1 << 20, '9')};
  EXPECT_FALSE(codegen::parse_targets(lists, error));
  EXPECT_EQ(error, "unknown target 'cuda:sm_" + std::string(56, '9') +
                       "…' (1048584 bytes; no target name is over 64)");
}
