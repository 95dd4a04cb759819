//===- autotune_test.cpp - Tunables, records, the tuner, the cache, selection -----------------===//
//
// The writer processes of the cache concurrency test are this binary, spawned with
// CUBECC_AUTOTUNE_TEST_WRITER set: the test TuningCacheWriter.* does their work and is skipped in
// an ordinary run.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/autotune/cache.h"
#include "cubecc/autotune/library.h"
#include "cubecc/autotune/record.h"
#include "cubecc/autotune/select.h"
#include "cubecc/autotune/tunable.h"
#include "cubecc/autotune/tuner.h"
#include "cubecc/dsl.h"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/runtime.h"
#include "library_tunable.h"

#include "test_support.h"
#include <fmt/format.h>
#include <gmock/gmock.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace cubecc {
namespace {

namespace fs = std::filesystem;
using autotune::Problem;
using autotune::TuningRecord;
using runtime::Runtime;
using ::testing::HasSubstr;

//===- Helpers -------------------------------------------------------------------------------===//

/// A fresh folder under the test's temporary directory, removed at the end of the test.
class TemporaryFolder {
public:
  TemporaryFolder() {
    path_ = fs::temp_directory_path() /
            fmt::format("cubecc-autotune-{}-{}", ::getpid(),
                        ::testing::UnitTest::GetInstance()->random_seed() + counter()++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TemporaryFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path &path() const { return path_; }

private:
  static int &counter() {
    static int n = 0;
    return n;
  }
  fs::path path_;
};

using test::ScopedEnv;

/// out[i] = in[i] * kScale + kOffset: kOffset != 0 is a deliberately wrong variant.
template <int kScale, int kOffset> void scale(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  auto i = dsl::global_id().x;
  dsl::if_(i < out.size(),
           [&] { out[i] = in[i] * static_cast<float>(kScale) + static_cast<float>(kOffset); });
}

template <int kScale, int kOffset, uint32_t kWorkgroup> autotune::Variant scale_variant() {
  autotune::Variant v;
  v.configuration = fmt::format("scale={},offset={},workgroup={}", kScale, kOffset, kWorkgroup);
  v.load = [configuration = v.configuration](Runtime &rt) {
    return rt.kernel("autotune_test:" + configuration, [] {
      dsl::TraceResult traced = dsl::trace<scale<kScale, kOffset>>(
          fmt::format("scale_{}_{}_{}", kScale, kOffset, kWorkgroup),
          {.workgroup = {kWorkgroup, 1, 1}, .parameter_names = {"in", "out"}});
      if (!traced.module)
        throw runtime::Error(runtime::ErrorKind::Compile, ir::to_string(traced.errors));
      return std::move(traced.module);
    });
  };
  return v;
}

/// Runs the scale kernels on n = shape[0] elements; `repeat[variant]` launches per run.
class ScaleBenchmark : public autotune::Benchmark {
public:
  explicit ScaleBenchmark(std::vector<uint32_t> repeat = {}) : repeat_(std::move(repeat)) {}
  void prepare(Runtime &rt, const Problem &problem) override {
    n_ = static_cast<uint32_t>(problem.shape.at(0));
    std::vector<float> in(n_);
    for (uint32_t i = 0; i < n_; ++i)
      in[i] = static_cast<float>(i % 97) * 0.25f;
    in_ = rt.upload(in);
    out_ = rt.upload(std::vector<float>(n_, -1.0f));
    ++prepared;
  }
  void run(Runtime &rt, size_t variant, const runtime::KernelHandle &kernel) override {
    uint32_t times = variant < repeat_.size() ? repeat_[variant] : 1;
    for (uint32_t r = 0; r < times; ++r)
      rt.launch(kernel, runtime::grid_1d(n_, kernel.abi().workgroup_size[0]), in_, n_, 1u, out_, n_,
                1u);
    ++runs[variant];
  }
  void reset(Runtime &rt, size_t) override {
    std::vector<float> minus_one(n_, -1.0f);
    rt.upload(out_, std::span<const float>(minus_one));
  }
  std::vector<autotune::Output> outputs(Runtime &rt, size_t) override {
    autotune::Output o;
    o.element = ir::Scalar::F32;
    o.bytes.resize(out_.bytes());
    rt.read(out_, o.bytes.data(), o.bytes.size());
    return {o};
  }
  int prepared = 0;
  std::map<size_t, int> runs;

private:
  std::vector<uint32_t> repeat_;
  uint32_t n_ = 0;
  runtime::Buffer in_, out_;
};

autotune::Tunable scale_tunable(std::vector<autotune::Variant> variants) {
  return autotune::Tunable("scale", {"n"}, std::move(variants));
}

/// A record with every field set, and characters that need escaping in JSON and in keys.
TuningRecord sample_record(std::string tunable = "matmul", std::string bucket = "m=128;f32") {
  TuningRecord r;
  r.tunable = std::move(tunable);
  r.bucket = std::move(bucket);
  r.device = "vulkan|Mesa|llvmpipe \"quoted\" \\ back|10005:0000|Mesa 22.3.6";
  r.configuration = "tm=32,tn=32,tk=8";
  r.timings = {{"tm=16,tn=16,tk=16", 1500.5, 1400.25, 10, false, false, ""},
               {"tm=32,tn=32,tk=8", 1200, 1100, 10, false, false, ""},
               {"tm=64", 9000, 8000, 3, true, false, ""},
               {"tm=128", 0, 0, 0, false, true, "not valid for this problem\n(tab\t)"}};
  r.cubecc_version = std::string(cubecc::version());
  r.created = "2026-11-30T12:00:00Z";
  return r;
}

std::string read_text(const fs::path &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

//===- Buckets and keys ----------------------------------------------------------------------===//

TEST(Bucket, each_dimension_rounds_up_to_a_power_of_two_and_the_types_follow) {
  const std::vector<std::string> dims = {"m", "n", "k"};
  EXPECT_EQ(autotune::power_of_two_bucket(dims, {{500, 512, 200}, {ir::Scalar::F32}}),
            "m=512,n=512,k=256;f32");
  EXPECT_EQ(autotune::power_of_two_bucket(dims, {{1, 0, 513}, {}}), "m=1,n=0,k=1024");
  EXPECT_EQ(autotune::power_of_two_bucket(dims, {{3, 3, 3}, {ir::Scalar::F16, ir::Scalar::F32}}),
            "m=4,n=4,k=4;f16,f32");
  EXPECT_EQ(autotune::round_up_to_power_of_two((uint64_t{1} << 63) + 1), (uint64_t{1} << 63) + 1);
  EXPECT_EQ(autotune::round_up_to_power_of_two(uint64_t{1} << 40), uint64_t{1} << 40);
  EXPECT_THROW(autotune::power_of_two_bucket(dims, {{1, 2}, {}}), runtime::Error);
}

TEST(Bucket, problems_in_one_bucket_share_it_and_a_custom_key_replaces_the_default) {
  autotune::Tunable t = scale_tunable({scale_variant<2, 0, 32>()});
  EXPECT_EQ(t.bucket({{1000}, {ir::Scalar::F32}}), t.bucket({{1024}, {ir::Scalar::F32}}));
  EXPECT_NE(t.bucket({{1024}, {ir::Scalar::F32}}), t.bucket({{1025}, {ir::Scalar::F32}}));
  EXPECT_NE(t.bucket({{1024}, {ir::Scalar::F32}}), t.bucket({{1024}, {ir::Scalar::F16}}));
  autotune::Tunable exact("scale", {"n"}, {scale_variant<2, 0, 32>()},
                          [](std::span<const std::string>, const Problem &p) {
                            return fmt::format("exact:{}", p.shape[0]);
                          });
  EXPECT_EQ(exact.bucket({{1000}, {}}), "exact:1000");
}

TEST(Tunable, refuses_no_variants_and_two_variants_of_one_configuration) {
  EXPECT_THROW(scale_tunable({}), runtime::Error);
  EXPECT_THROW(scale_tunable({scale_variant<2, 0, 32>(), scale_variant<2, 0, 32>()}),
               runtime::Error);
  autotune::Tunable t = scale_tunable({scale_variant<2, 0, 32>(), scale_variant<2, 0, 64>()});
  EXPECT_EQ(t.find("scale=2,offset=0,workgroup=64"), 1u);
  EXPECT_EQ(t.find("nope"), std::nullopt);
}

TEST(DeviceFingerprint, names_the_model_and_driver_and_keys_are_injective) {
  runtime::DeviceInfo info;
  info.backend = "vulkan";
  info.vendor = "Mesa";
  info.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  info.arch = "10005:0000";
  info.driver = "llvmpipe Mesa 22.3.6";
  std::string f = autotune::device_fingerprint(info);
  for (const std::string &part : {info.backend, info.vendor, info.name, info.arch, info.driver})
    EXPECT_THAT(f, HasSubstr(part));
  runtime::DeviceInfo newer = info;
  newer.driver = "llvmpipe Mesa 23.0.0";
  EXPECT_NE(autotune::device_fingerprint(newer), f);
  // The same model reports the same fingerprint whatever else differs (index, memory, ...).
  runtime::DeviceInfo same = info;
  same.max_buffer_bytes = 12345;
  EXPECT_EQ(autotune::device_fingerprint(same), f);
  // Separators inside fields cannot make two different triples collide.
  EXPECT_NE(autotune::record_key("a|b", "c", "d"), autotune::record_key("a", "b|c", "d"));
  EXPECT_NE(autotune::record_key("a\\", "|c", "d"), autotune::record_key("a\\|", "c", "d"));
  EXPECT_EQ(autotune::record_key("t", "b", "d"), autotune::record_key("t", "b", "d"));
}

TEST(DeviceFingerprint, of_the_interp_device_is_stable_across_opens) {
  EXPECT_EQ(autotune::device_fingerprint(Runtime::open("interp").info()),
            autotune::device_fingerprint(Runtime::open("interp").info()));
}

//===- Records -------------------------------------------------------------------------------===//

TEST(TuningRecord, round_trips_through_json) {
  TuningRecord r = sample_record();
  std::string text = autotune::to_json(r);
  std::string error;
  std::optional<TuningRecord> back = autotune::parse_record(text, error);
  ASSERT_TRUE(back) << error << "\n" << text;
  EXPECT_EQ(*back, r);
  EXPECT_EQ(autotune::to_json(*back), text);
  EXPECT_THAT(text, HasSubstr("\"format\": \"cubecc-tuning-record\""));
}

TEST(TuningRecord, every_truncation_is_rejected_with_a_message) {
  std::string text = autotune::to_json(sample_record());
  // The last characters are "}\n": cutting the newline leaves a complete object.
  for (size_t length = 0; length + 1 < text.size(); ++length) {
    std::string error;
    EXPECT_FALSE(autotune::parse_record(std::string_view(text).substr(0, length), error))
        << "prefix of " << length;
    EXPECT_FALSE(error.empty()) << "prefix of " << length;
  }
}

/// parse_record's error for `text`, or "(parsed)" when it parses.
std::string parse_error(const std::string &text) {
  std::string error;
  return autotune::parse_record(text, error) ? "(parsed)" : error;
}

/// The sample record's JSON with `from` replaced by `to` (once; the test fails if absent).
std::string edited(std::string_view from, std::string_view to) {
  std::string text = autotune::to_json(sample_record());
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

TEST(TuningRecord, wrong_types_missing_and_unknown_fields_and_garbage_are_rejected) {
  EXPECT_THAT(parse_error(""), HasSubstr("tuning record:"));
  EXPECT_THAT(parse_error("[]"), HasSubstr("is not an object"));
  EXPECT_THAT(parse_error("{}"), HasSubstr("missing field 'format'"));
  EXPECT_THAT(parse_error(autotune::to_json(sample_record()) + "x"), HasSubstr("tuning record"));
  EXPECT_THAT(parse_error(autotune::to_json(sample_record()) + "{}"), HasSubstr("tuning record"));
  EXPECT_THAT(parse_error(edited("\"samples\": 10", "\"samples\": \"10\"")),
              HasSubstr("timings[0]: 'samples' is not an integer"));
  EXPECT_THAT(parse_error(edited("\"samples\": 10", "\"samples\": -1")),
              HasSubstr("'samples' is not an integer >= 0"));
  EXPECT_THAT(parse_error(edited("\"samples\": 10", "\"samples\": 1.5")),
              HasSubstr("'samples' is not an integer >= 0"));
  EXPECT_THAT(parse_error(edited("\"median_ns\": 1500.5", "\"median_ns\": -3")),
              HasSubstr("'median_ns' is not a finite number >= 0"));
  EXPECT_THAT(parse_error(edited("\"eliminated\": false", "\"eliminated\": 0")),
              HasSubstr("'eliminated' is not true or false"));
  EXPECT_THAT(parse_error(edited("\"tunable\": \"matmul\"", "\"tunable\": 7")),
              HasSubstr("'tunable' is not a string"));
  EXPECT_THAT(parse_error(edited("\"tunable\": \"matmul\",", "")),
              HasSubstr("missing field 'tunable'"));
  EXPECT_THAT(parse_error(edited("\"tunable\": \"matmul\"", "\"tunable\": \"matmul\", \"x\": 1")),
              HasSubstr("unknown field 'x'"));
  EXPECT_THAT(parse_error(edited("\"timings\": [", "\"timings\": 3, \"y\": [")),
              HasSubstr("'timings' is not an array"));
  EXPECT_THAT(parse_error(edited("\"version\": 1", "\"version\": 2")),
              HasSubstr("format version 2"));
  EXPECT_THAT(parse_error(edited("\"cubecc-tuning-record\"", "\"something-else\"")),
              HasSubstr("'format' is 'something-else'"));
  // The winner must be a timed, valid variant of the record.
  EXPECT_THAT(parse_error(edited("\"configuration\": \"tm=32,tn=32,tk=8\",\n  \"created\"",
                                 "\"configuration\": \"tm=128\",\n  \"created\"")),
              HasSubstr("the winner 'tm=128' is not a timed, valid variant"));
  EXPECT_THAT(parse_error(edited("\"tm=16,tn=16,tk=16\"", "\"tm=32,tn=32,tk=8\"")),
              HasSubstr("two timings of configuration"));
  EXPECT_THAT(parse_error("{\"format\": \"cubecc-tuning-record\", \"version\": 1e400}"),
              HasSubstr("tuning record"));
  // Numbers and dates that no tuner writes.
  EXPECT_THAT(
      parse_error(edited("\"min_ns\": 1400.25", "\"min_ns\": 1600")),
      HasSubstr("timing of 'tm=16,tn=16,tk=16' has min_ns 1600 above its median_ns 1500.5"));
  for (const char *date : {"9999-99-99", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
                           "2026-11-30T24:00:00Z", "2026-11-30 12:00:00Z", "now"})
    EXPECT_THAT(parse_error(edited("2026-11-30T12:00:00Z", date)),
                HasSubstr(std::string("'created' is '") + date + "', not a UTC time"))
        << date;
  for (const char *date : {"2024-02-29T23:59:60Z", "0001-01-01T00:00:00Z"})
    EXPECT_EQ(parse_error(edited("2026-11-30T12:00:00Z", date)), "(parsed)") << date;
  EXPECT_EQ(parse_error(autotune::to_json(sample_record())), "(parsed)");
}

//===- The tuner -----------------------------------------------------------------------------===//

TEST(Tuner, times_every_valid_variant_and_picks_one_of_them) {
  Runtime rt = Runtime::open("interp");
  autotune::Variant never = scale_variant<2, 0, 128>();
  never.valid = [](const Problem &p) { return p.shape[0] > 1'000'000; };
  autotune::Tunable t =
      scale_tunable({scale_variant<2, 0, 32>(), never, scale_variant<2, 0, 64>()});
  ScaleBenchmark bench;
  autotune::TuneOptions options;
  options.warmup_runs = 1;
  options.samples = 4;
  options.elimination_after = 0;
  TuningRecord r = autotune::tune(rt, t, {{1000}, {ir::Scalar::F32}}, bench, options);
  EXPECT_EQ(r.tunable, "scale");
  EXPECT_EQ(r.bucket, "n=1024;f32");
  EXPECT_EQ(r.device, autotune::device_fingerprint(rt.info()));
  EXPECT_EQ(r.cubecc_version, cubecc::version());
  EXPECT_THAT(r.configuration,
              ::testing::AnyOf("scale=2,offset=0,workgroup=32", "scale=2,offset=0,workgroup=64"));
  ASSERT_EQ(r.timings.size(), 3u);
  for (size_t i : {0u, 2u}) {
    EXPECT_EQ(r.timings[i].samples, 4u);
    EXPECT_FALSE(r.timings[i].invalid);
    EXPECT_GT(r.timings[i].min_ns, 0);
    EXPECT_LE(r.timings[i].min_ns, r.timings[i].median_ns);
    // warm-up + samples + the cross-check run
    EXPECT_EQ(bench.runs[i], 1 + 4 + 1);
  }
  EXPECT_TRUE(r.timings[1].invalid);
  EXPECT_EQ(r.timings[1].samples, 0u);
  EXPECT_EQ(bench.runs.count(1), 0u);
  EXPECT_EQ(bench.prepared, 1);
  // The winner has the lowest median.
  size_t winner = *t.find(r.configuration);
  EXPECT_LE(r.timings[winner].median_ns, r.timings[2 - winner].median_ns);
  std::string error;
  EXPECT_TRUE(autotune::parse_record(autotune::to_json(r), error)) << error;
}

TEST(Tuner, eliminates_a_clearly_slower_variant_after_three_samples) {
  Runtime rt = Runtime::open("interp");
  autotune::Tunable t = scale_tunable({scale_variant<2, 0, 32>(), scale_variant<2, 0, 64>()});
  ScaleBenchmark bench({1, 40}); // variant 1 launches 40 times per run
  autotune::TuneOptions options;
  options.warmup_runs = 1;
  options.samples = 8;
  TuningRecord r = autotune::tune(rt, t, {{256}, {ir::Scalar::F32}}, bench, options);
  EXPECT_EQ(r.configuration, "scale=2,offset=0,workgroup=32");
  EXPECT_FALSE(r.timings[0].eliminated);
  EXPECT_EQ(r.timings[0].samples, 8u);
  EXPECT_TRUE(r.timings[1].eliminated);
  EXPECT_EQ(r.timings[1].samples, 3u);
  EXPECT_GT(r.timings[1].min_ns, 1.5 * r.timings[0].median_ns);
}

TEST(Tuner, a_variant_that_disagrees_is_an_error_naming_it) {
  Runtime rt = Runtime::open("interp");
  autotune::Tunable t = scale_tunable({scale_variant<2, 0, 32>(), scale_variant<2, 1, 64>()});
  ScaleBenchmark bench;
  autotune::TuneOptions options;
  options.warmup_runs = 0;
  options.samples = 2;
  try {
    autotune::tune(rt, t, {{300}, {ir::Scalar::F32}}, bench, options);
    FAIL() << "the wrong variant was not caught";
  } catch (const runtime::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("variant 'scale=2,offset=1,workgroup=64' disagrees with "
                                    "variant 'scale=2,offset=0,workgroup=32'"));
    EXPECT_THAT(e.what(), HasSubstr("output 0 element 0: 0 vs 1"));
  }
  // Without the cross-check the same tuning completes (the check is what caught it).
  options.cross_check = false;
  EXPECT_NO_THROW(autotune::tune(rt, t, {{300}, {ir::Scalar::F32}}, bench, options));
}

TEST(Tuner, no_valid_variant_is_an_error) {
  Runtime rt = Runtime::open("interp");
  autotune::Variant v = scale_variant<2, 0, 32>();
  v.valid = [](const Problem &) { return false; };
  autotune::Tunable t = scale_tunable({v});
  ScaleBenchmark bench;
  EXPECT_THROW(autotune::tune(rt, t, {{16}, {}}, bench), runtime::Error);
}

TEST(CompareOutputs, integers_are_exact_and_floats_within_the_relative_tolerance) {
  auto floats = [](std::vector<float> v) {
    autotune::Output o{ir::Scalar::F32, std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    return std::vector<autotune::Output>{o};
  };
  auto ints = [](std::vector<int32_t> v) {
    autotune::Output o{ir::Scalar::I32, std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    return std::vector<autotune::Output>{o};
  };
  EXPECT_EQ(autotune::compare_outputs(floats({1, 2}), floats({1, 2.000001f}), 1e-5, 0), "");
  EXPECT_THAT(autotune::compare_outputs(floats({1, 2}), floats({1, 2.001f}), 1e-5, 0),
              HasSubstr("output 0 element 1"));
  EXPECT_EQ(autotune::compare_outputs(floats({NAN}), floats({NAN}), 0, 0), "");
  EXPECT_THAT(autotune::compare_outputs(ints({5, -7}), ints({5, -8}), 0.5, 10),
              HasSubstr("element 1: -7 vs -8 (integers: exact)"));
  EXPECT_THAT(autotune::compare_outputs(ints({5}), ints({5, 6}), 0, 0), HasSubstr("bytes"));
}

//===- The example library's tunables --------------------------------------------------------===//

std::unique_ptr<dsl::KernelLibrary> open_examples() {
  std::string error;
  auto library = dsl::KernelLibrary::open(CUBECC_EXAMPLES_LIBRARY, error);
  EXPECT_TRUE(library) << error;
  return library;
}

TEST(LibraryTunables, the_example_library_declares_matmul_through_the_c_abi) {
  auto library = open_examples();
  ASSERT_TRUE(library);
  EXPECT_EQ(library->abi_version(), 2u);
  ASSERT_EQ(library->tunables().size(), dsl::registered_tunables().size());
  const dsl::KernelLibrary::Tunable *matmul = nullptr;
  for (const auto &t : library->tunables())
    if (t.name == "matmul")
      matmul = &t;
  ASSERT_TRUE(matmul);
  ASSERT_EQ(matmul->variants.size(), 2u);
  EXPECT_EQ(library->kernels()[matmul->variants[0]].name, "matmul_16x16x16");
  EXPECT_EQ(library->kernels()[matmul->variants[1]].name, "matmul_32x32x8");
  EXPECT_EQ(matmul->dimensions, (std::vector<std::string>{"m", "n", "k"}));
  EXPECT_EQ(matmul->anchors,
            (std::vector<std::vector<uint64_t>>{{128, 128, 128}, {256, 256, 256}}));
  EXPECT_EQ(matmul->element_types, "f32");

  size_t index = static_cast<size_t>(matmul - library->tunables().data());
  dsl::TunableLaunch launch;
  std::string error;
  const std::vector<uint64_t> shape = {100, 40, 8};
  ASSERT_EQ(library->describe(index, 1, shape, launch, error),
            dsl::KernelLibrary::Described::Launch)
      << error;
  EXPECT_EQ(launch.grid, (std::array<uint32_t, 3>{2, 4, 1})); // ceil(40 / 32), ceil(100 / 32)
  EXPECT_EQ(launch.buffer_elements, (std::vector<uint64_t>{800, 320, 4000}));
  ASSERT_EQ(launch.values.size(), 12u);
  EXPECT_EQ(launch.values[0].kind, dsl::LaunchValue::UInt);
  EXPECT_EQ(launch.values[0].u, 100u);
  const std::vector<uint64_t> empty = {0, 40, 8};
  EXPECT_EQ(library->describe(index, 0, empty, launch, error),
            dsl::KernelLibrary::Described::Invalid);
  const std::vector<uint64_t> two = {1, 2};
  EXPECT_EQ(library->describe(index, 0, two, launch, error), dsl::KernelLibrary::Described::Failed);
  EXPECT_THAT(error, HasSubstr("tunable 'matmul' has 3 dimensions"));
  EXPECT_EQ(library->describe(index, 7, shape, launch, error),
            dsl::KernelLibrary::Described::Failed);
}

TEST(LibraryTunables, the_loader_reads_version_1_tables_and_refuses_unknown_versions) {
  std::string error;
  {
    ScopedEnv v1("CUBECC_TEST_LIBRARY_ABI", "1");
    auto library = dsl::KernelLibrary::open(CUBECC_VERSIONS_LIBRARY, error);
    ASSERT_TRUE(library) << error;
    EXPECT_EQ(library->abi_version(), 1u);
    ASSERT_EQ(library->kernels().size(), 1u);
    EXPECT_EQ(library->kernels()[0].name, "empty");
    EXPECT_TRUE(library->tunables().empty()); // version 1 has no tunable fields to read
  }
  for (const char *version : {"0", "3"}) {
    ScopedEnv v("CUBECC_TEST_LIBRARY_ABI", version);
    EXPECT_FALSE(dsl::KernelLibrary::open(CUBECC_VERSIONS_LIBRARY, error)) << version;
    EXPECT_THAT(error,
                HasSubstr(fmt::format("uses ABI version {}, this cubecc reads 1 to 2", version)));
  }
  ScopedEnv v2("CUBECC_TEST_LIBRARY_ABI", "2");
  EXPECT_FALSE(dsl::KernelLibrary::open(CUBECC_VERSIONS_LIBRARY, error));
  EXPECT_THAT(error, HasSubstr("tunable 'broken': variant 'missing' is not a kernel of the "
                               "library"));
}

size_t matmul_index(const dsl::KernelLibrary &library) {
  for (size_t i = 0; i < library.tunables().size(); ++i)
    if (library.tunables()[i].name == "matmul")
      return i;
  ADD_FAILURE() << "no matmul tunable";
  return 0;
}

TEST(LibraryTunables, matmul_tunes_at_its_anchors_on_vulkan_with_outputs_cross_checked) {
  Runtime rt = [] {
    try {
      return Runtime::open("vulkan");
    } catch (const runtime::Error &) {
      return Runtime::open("interp");
    }
  }();
  if (rt.info().backend != "vulkan")
    GTEST_SKIP() << "no Vulkan device";
  auto library = open_examples();
  ASSERT_TRUE(library);
  autotune::LibraryTunable matmul = tools::library_tunable(*library, matmul_index(*library));
  auto start = std::chrono::steady_clock::now();
  std::vector<TuningRecord> records = autotune::tune_library(rt, matmul);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("tuning_seconds", fmt::format("{:.2f}", seconds));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].bucket, "m=128,n=128,k=128;f32");
  EXPECT_EQ(records[1].bucket, "m=256,n=256,k=256;f32");
  for (const TuningRecord &r : records) {
    EXPECT_EQ(r.tunable, "matmul");
    EXPECT_THAT(r.configuration, ::testing::AnyOf("tm=16,tn=16,tk=16", "tm=32,tn=32,tk=8"));
    ASSERT_EQ(r.timings.size(), 2u);
    for (const autotune::VariantTiming &t : r.timings) {
      EXPECT_FALSE(t.invalid) << t.configuration << ": " << t.note;
      EXPECT_GE(t.samples, 3u) << t.configuration;
      EXPECT_GT(t.min_ns, 0) << t.configuration;
    }
  }
  EXPECT_LT(seconds, 30) << "tuning the example matmul should take seconds on lavapipe";
}

TEST(LibraryTunables, a_wrong_variant_is_caught_by_the_cross_check) {
  Runtime rt = Runtime::open("interp");
  auto library = open_examples();
  ASSERT_TRUE(library);
  autotune::LibraryTunable matmul = tools::library_tunable(*library, matmul_index(*library));
  matmul.anchors = {{40, 24, 16}};
  // Variant 1 launches one row of workgroups too few: the last rows of C keep their inputs.
  auto describe = matmul.describe;
  matmul.describe = [describe](size_t variant, std::span<const uint64_t> shape,
                               autotune::LaunchDescription &launch) {
    if (!describe(variant, shape, launch))
      return false;
    if (variant == 1)
      launch.grid[1] -= 1;
    return true;
  };
  autotune::TuneOptions options;
  options.warmup_runs = 0;
  options.samples = 1;
  try {
    autotune::tune_library(rt, matmul, options);
    FAIL() << "the wrong variant was not caught";
  } catch (const runtime::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("variant 'tm=32,tn=32,tk=8' disagrees with variant "
                                    "'tm=16,tn=16,tk=16'"));
  }
  // Unchanged, the same problem cross-checks (the variants agree bit for bit).
  autotune::LibraryTunable right = tools::library_tunable(*library, matmul_index(*library));
  right.anchors = {{40, 24, 16}};
  std::vector<TuningRecord> records = autotune::tune_library(rt, right, options);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].bucket, "m=64,n=32,k=16;f32");
}

TEST(LibraryTunables, fill_is_deterministic_and_suited_to_the_element_type) {
  EXPECT_EQ(autotune::fill_bytes(ir::Scalar::F32, 100, 3),
            autotune::fill_bytes(ir::Scalar::F32, 100, 3));
  EXPECT_NE(autotune::fill_bytes(ir::Scalar::F32, 100, 3),
            autotune::fill_bytes(ir::Scalar::F32, 100, 4));
  std::vector<uint8_t> f = autotune::fill_bytes(ir::Scalar::F32, 1000, 0);
  std::vector<uint8_t> i = autotune::fill_bytes(ir::Scalar::I16, 1000, 0);
  ASSERT_EQ(f.size(), 4000u);
  ASSERT_EQ(i.size(), 2000u);
  for (size_t k = 0; k < 1000; ++k) {
    float x;
    int16_t y;
    std::memcpy(&x, f.data() + 4 * k, 4);
    std::memcpy(&y, i.data() + 2 * k, 2);
    EXPECT_TRUE(x >= -1 && x <= 1) << x;
    EXPECT_TRUE(y >= -64 && y <= 64) << y;
  }
}

//===- The cache -----------------------------------------------------------------------------===//

TEST(TuningCache, the_folder_comes_from_cubecc_cache_dir_then_xdg_then_home) {
  ScopedEnv a("CUBECC_CACHE_DIR", "/c"), b("XDG_CACHE_HOME", "/x"), c("HOME", "/h");
  EXPECT_EQ(autotune::TuningCache::default_directory(), "/c");
  {
    ScopedEnv unset("CUBECC_CACHE_DIR", nullptr);
    EXPECT_EQ(autotune::TuningCache::default_directory(), "/x/cubecc");
    ScopedEnv unset_xdg("XDG_CACHE_HOME", "");
    EXPECT_EQ(autotune::TuningCache::default_directory(), "/h/.cache/cubecc");
    ScopedEnv unset_home("HOME", nullptr);
    EXPECT_THROW(autotune::TuningCache::default_directory(), runtime::Error);
  }
}

TEST(TuningCache, stores_and_finds_records_one_file_per_key) {
  TemporaryFolder dir;
  autotune::TuningCache cache(dir.path().string());
  TuningRecord a = sample_record("matmul", "m=128"), b = sample_record("matmul", "m=256");
  EXPECT_EQ(cache.find(autotune::record_key(a)), std::nullopt);
  cache.store(a);
  cache.store(b);
  EXPECT_EQ(cache.find(autotune::record_key(a)), a);
  EXPECT_EQ(cache.find(autotune::record_key(b)), b);
  // A newer record of the same key replaces the old one.
  b.configuration = "tm=16,tn=16,tk=16";
  cache.store(b);
  EXPECT_EQ(cache.find(autotune::record_key(b)), b);
  EXPECT_EQ(cache.list().size(), 2u);
  const std::string path = cache.path_of(autotune::record_key(a));
  EXPECT_EQ(fs::path(path).parent_path(), dir.path() / "tuning");
  EXPECT_THAT(fs::path(path).filename().string(), ::testing::MatchesRegex("[0-9a-f]{32}\\.json"));
  size_t files = 0;
  for (const auto &entry : fs::directory_iterator(dir.path() / "tuning")) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".")) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 2u);
}

TEST(TuningCache, corrupt_and_foreign_files_are_misses) {
  TemporaryFolder dir;
  autotune::TuningCache cache(dir.path().string());
  TuningRecord a = sample_record("matmul", "m=128"), b = sample_record("matmul", "m=256");
  cache.store(a);
  cache.store(b);
  const std::string key_a = autotune::record_key(a);
  std::string text = read_text(cache.path_of(key_a));
  std::ofstream(cache.path_of(key_a), std::ios::trunc) << text.substr(0, text.size() / 2);
  EXPECT_EQ(cache.find(key_a), std::nullopt);
  // b's file renamed to a's name: it parses, but it is the record of another key.
  fs::copy_file(cache.path_of(autotune::record_key(b)), cache.path_of(key_a),
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(cache.find(key_a), std::nullopt);
  std::ofstream(dir.path() / "tuning" / "0123456789abcdef0123456789abcdef.json") << "\x01garbage";
  std::vector<TuningRecord> listed = cache.list();
  ASSERT_EQ(listed.size(), 1u); // b only: a's file holds b, garbage is garbage
  EXPECT_EQ(listed[0], b);
  // Storing again repairs it.
  cache.store(a);
  EXPECT_EQ(cache.find(key_a), a);
}

constexpr const char *kWriterVariable = "CUBECC_AUTOTUNE_TEST_WRITER";
constexpr int kWriters = 8, kRecordsPerWriter = 120, kKeys = 24;

/// Run in each writer process: tunes once on interp, then stores kRecordsPerWriter records over
/// kKeys keys (every key is written by every writer), reading keys back as it goes: a record
/// that exists must parse.
TEST(TuningCacheWriter, writes_records_when_spawned_by_the_concurrency_test) {
  const char *spec = std::getenv(kWriterVariable);
  if (!spec)
    GTEST_SKIP() << "run by TuningCache.eight_processes_writing_at_once_leave_only_whole_records";
  std::string folder = spec;
  size_t colon = folder.rfind(':');
  ASSERT_NE(colon, std::string::npos);
  const int writer = std::stoi(folder.substr(colon + 1));
  folder.resize(colon);
  autotune::TuningCache cache(folder);

  Runtime rt = Runtime::open("interp");
  autotune::Tunable t = scale_tunable({scale_variant<2, 0, 32>(), scale_variant<2, 0, 64>()});
  ScaleBenchmark bench;
  autotune::TuneOptions options;
  options.warmup_runs = 0;
  options.samples = 3;
  TuningRecord tuned = autotune::tune(rt, t, {{64}, {ir::Scalar::F32}}, bench, options);
  // Start together: the parent creates `go` once every writer is spawned.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(fs::path(folder) / "go") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int i = 0; i < kRecordsPerWriter; ++i) {
    TuningRecord r = tuned;
    r.bucket = fmt::format("n={}", i % kKeys);
    r.timings[0].note = fmt::format("writer {} record {}", writer, i); // differs per writer
    cache.store(r);
    std::string key =
        autotune::record_key(tuned.tunable, fmt::format("n={}", (i * 7) % kKeys), tuned.device);
    if (fs::exists(cache.path_of(key))) {
      std::string error;
      ASSERT_TRUE(autotune::parse_record(read_text(cache.path_of(key)), error))
          << "writer " << writer << " read a torn record: " << error;
    }
  }
}

TEST(TuningCache, eight_processes_writing_at_once_leave_only_whole_records) {
  TemporaryFolder dir;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    std::string spec = fmt::format("{}={}:{}", kWriterVariable, dir.path().string(), w);
    std::vector<std::string> env_strings = {spec};
    for (char **e = environ; *e; ++e)
      if (!std::string_view(*e).starts_with(kWriterVariable))
        env_strings.emplace_back(*e);
    std::vector<char *> envp;
    for (std::string &s : env_strings)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::string filter = "--gtest_filter=TuningCacheWriter.*";
    std::string brief = "--gtest_brief=1";
    char *argv[] = {self.data(), filter.data(), brief.data(), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    children.push_back(pid);
  }
  std::ofstream(dir.path() / "go") << "go";
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "a writer process failed (status " << status << ")";
  }
  size_t records = 0;
  std::set<std::string> buckets;
  for (const auto &entry : fs::directory_iterator(dir.path() / "tuning")) {
    std::string name = entry.path().filename().string();
    EXPECT_FALSE(name.starts_with(".")) << "a temporary file was left: " << name;
    std::string error;
    std::optional<TuningRecord> r = autotune::parse_record(read_text(entry.path()), error);
    ASSERT_TRUE(r) << name << ": " << error;
    EXPECT_THAT(r->timings[0].note, ::testing::StartsWith("writer "));
    buckets.insert(r->bucket);
    ++records;
  }
  EXPECT_EQ(records, static_cast<size_t>(kKeys));
  EXPECT_EQ(buckets.size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(autotune::TuningCache(dir.path().string()).list().size(), static_cast<size_t>(kKeys));
}

TEST(TuningCache, threads_storing_at_once_leave_only_whole_records) {
  TemporaryFolder dir;
  autotune::TuningCache cache(dir.path().string());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 50; ++i) {
        TuningRecord r = sample_record("matmul", fmt::format("m={}", i % 5));
        r.timings[0].note = fmt::format("thread {}", t);
        cache.store(r);
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(cache.list().size(), 5u);
  for (const auto &entry : fs::directory_iterator(dir.path() / "tuning"))
    EXPECT_FALSE(entry.path().filename().string().starts_with(".")) << entry.path();
}

//===- Selection -----------------------------------------------------------------------------===//

/// An environment that holds tuning records only.
class FakeEnvironment : public runtime::EnvironmentSource {
public:
  runtime::EnvironmentLookup find_kernel(const ir::Hash128 &, std::string_view,
                                         std::span<const runtime::BinaryTarget>) const override {
    return {runtime::EnvironmentLookup::Miss, {}, "fake environment: no kernels"};
  }
  std::optional<std::string> find_tuning(std::string_view key) const override {
    ++lookups;
    auto it = records.find(std::string(key));
    if (it == records.end())
      return std::nullopt;
    return it->second;
  }
  const std::string &name() const override { return name_; }
  std::map<std::string, std::string> records;
  mutable int lookups = 0;

private:
  std::string name_ = "fake.cubeenv";
};

/// A record for `tunable` on `problem` on `rt` whose winner is `configuration`.
TuningRecord record_for(Runtime &rt, const autotune::Tunable &tunable, const Problem &problem,
                        const std::string &configuration) {
  TuningRecord r;
  r.tunable = tunable.name();
  r.bucket = tunable.bucket(problem);
  r.device = autotune::device_fingerprint(rt.info());
  r.configuration = configuration;
  for (const autotune::Variant &v : tunable.variants())
    r.timings.push_back({v.configuration, 100, 90, 3, false, false, ""});
  r.cubecc_version = std::string(cubecc::version());
  r.created = autotune::utc_timestamp();
  return r;
}

TEST(Selection, asks_the_environment_then_the_cache_then_tunes_then_takes_the_first_valid) {
  TemporaryFolder dir;
  Runtime rt = Runtime::open("interp");
  autotune::Variant first = scale_variant<2, 0, 32>();
  first.valid = [](const Problem &p) { return p.shape[0] >= 100; };
  autotune::Tunable t =
      scale_tunable({first, scale_variant<2, 0, 64>(), scale_variant<2, 0, 128>()});
  const Problem problem{{500}, {ir::Scalar::F32}};
  const std::string c0 = t.variants()[0].configuration, c1 = t.variants()[1].configuration,
                    c2 = t.variants()[2].configuration;
  auto environment = std::make_shared<FakeEnvironment>();
  rt.use_environment(environment);
  autotune::SelectOptions options;
  options.cache = autotune::TuningCache(dir.path().string());
  options.tune.warmup_runs = 0;
  options.tune.samples = 2;
  ScaleBenchmark bench;

  // 4. Nothing known, tuning not allowed: the first valid variant.
  autotune::Selection s = autotune::select_variant(rt, t, problem, options, &bench);
  EXPECT_EQ(s.source, autotune::SelectionSource::Default);
  EXPECT_EQ(s.variant, 0u);
  EXPECT_EQ(s.key,
            autotune::record_key("scale", "n=512;f32", autotune::device_fingerprint(rt.info())));
  EXPECT_EQ(environment->lookups, 1);
  EXPECT_EQ(bench.prepared, 0);
  // ... and for a problem variant 0 cannot run, the next one.
  EXPECT_EQ(autotune::select_variant(rt, t, {{50}, {ir::Scalar::F32}}, options).variant, 1u);

  // 3. Tuning allowed: tunes, stores in the cache.
  options.tune_on_miss = true;
  s = autotune::select_variant(rt, t, problem, options, &bench);
  EXPECT_EQ(s.source, autotune::SelectionSource::Tuned);
  EXPECT_EQ(bench.prepared, 1);
  ASSERT_TRUE(s.record);
  EXPECT_EQ(s.configuration, s.record->configuration);
  EXPECT_EQ(options.cache->find(s.key), s.record);

  // 2. The cache answers now (no tuning), with what it holds.
  options.cache->store(record_for(rt, t, problem, c2));
  s = autotune::select_variant(rt, t, problem, options, &bench);
  EXPECT_EQ(s.source, autotune::SelectionSource::Cache);
  EXPECT_EQ(s.variant, 2u);
  EXPECT_EQ(bench.prepared, 1);

  // 1. The environment wins over the cache.
  environment->records[s.key] = autotune::to_json(record_for(rt, t, problem, c1));
  s = autotune::select_variant(rt, t, problem, options, &bench);
  EXPECT_EQ(s.source, autotune::SelectionSource::Environment);
  EXPECT_EQ(s.variant, 1u);
  EXPECT_EQ(s.configuration, c1);

  // Unusable environment records fall through to the cache: a configuration the tunable lacks,
  // a corrupt record, another key's record.
  environment->records[s.key] = autotune::to_json(record_for(rt, t, problem, c1));
  TuningRecord unknown = record_for(rt, t, problem, c1);
  unknown.timings[1].configuration = unknown.configuration = "scale=9";
  environment->records[s.key] = autotune::to_json(unknown);
  EXPECT_EQ(autotune::select_variant(rt, t, problem, options).source,
            autotune::SelectionSource::Cache);
  environment->records[s.key] = "{\"format\": ";
  EXPECT_EQ(autotune::select_variant(rt, t, problem, options).source,
            autotune::SelectionSource::Cache);
  environment->records[s.key] = autotune::to_json(record_for(rt, t, {{4096}, {}}, c1));
  EXPECT_EQ(autotune::select_variant(rt, t, problem, options).source,
            autotune::SelectionSource::Cache);
  // A record whose winner is not valid for this problem is skipped too.
  options.use_environment = false;
  options.tune_on_miss = false;
  const Problem small{{60}, {ir::Scalar::F32}}; // bucket n=64: variant 0 invalid
  options.cache->store(record_for(rt, t, small, c0));
  s = autotune::select_variant(rt, t, small, options);
  EXPECT_EQ(s.source, autotune::SelectionSource::Default);
  EXPECT_EQ(s.variant, 1u);
}

} // namespace
} // namespace cubecc
