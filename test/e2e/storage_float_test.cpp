//===- storage_float_test.cpp - e4m3, e5m2, e2m1, ue8m0 conversion tables on every device -----===//
//
// The conversion tables of docs/ir.md §2.1, run on each device and compared bit for bit with the
// reference interpreter (which converts with double arithmetic, ir/src/float_formats.cpp; the
// devices run the legalize pass's integer expansion):
//   - every encoding of each storage float to f32, f16, bf16, f64 and to every storage float;
//   - every f16 and every bf16 value to each storage float;
//   - f32 and f64 values at and around every rounding point, and random ones, to each;
//   - 4-lane vectors both ways.
// NaNs included: the conversions define their bits (a NaN keeps its sign, and is the quiet NaN).
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/semantics.h"
#include "float_samples.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

using namespace cubecc;

namespace {

using ir::Scalar;

constexpr Scalar kStorage[] = {Scalar::E4M3, Scalar::E5M2, Scalar::E2M1, Scalar::UE8M0};

std::string type_name(Scalar s, unsigned lanes) {
  return lanes == 1 ? std::string(ir::scalar_name(s))
                    : fmt::format("{}x{}", ir::scalar_name(s), lanes);
}

/// out[i .. i + lanes) = cast(in[i .. i + lanes)), one invocation per `lanes` elements.
std::string cast_kernel(Scalar from, Scalar to, unsigned lanes) {
  return fmt::format(R"(module @storage_floats {{
  kernel @convert(%a: buffer<{0}, read>, %out: buffer<{1}, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %g = vec.extract %gid {{lane = 0}} : u32
    %lanes = const {4} : u32
    %i = mul %g, %lanes : u32
    %x = load %a, %i : {2}
    %y = cast %x : {3}
    store %out, %i, %y
    return
  }}
}}
)",
                     ir::scalar_name(from), ir::scalar_name(to), type_name(from, lanes),
                     type_name(to, lanes), lanes);
}

class StorageFloats : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam()); }

  /// The output bytes of cast(inputs) on `device` ("reference": the interpreter called directly).
  std::vector<uint8_t> convert(const std::string &device, Scalar from, Scalar to, unsigned lanes,
                               const std::vector<uint64_t> &inputs) {
    auto module = test::parse_valid(cast_kernel(from, to, lanes));
    if (!module)
      return {};
    size_t per_group = 64 * lanes, n = (inputs.size() + per_group - 1) / per_group * per_group;
    unsigned in_bytes = ir::scalar_bits(from) / 8, out_bytes = ir::scalar_bits(to) / 8;
    ir::HostBuffer a{from, std::vector<uint8_t>(n * in_bytes)};
    for (size_t i = 0; i < inputs.size(); ++i)
      std::memcpy(a.bytes.data() + i * in_bytes, &inputs[i], in_bytes); // little-endian
    ir::HostBuffer out{to, std::vector<uint8_t>(n * out_bytes)};
    std::vector<ir::Argument> args{{&a, {}}, {&out, {}}};
    ir::LaunchConfig config;
    config.num_workgroups = {static_cast<uint32_t>(n / per_group), 1, 1};
    std::vector<ir::Diagnostic> problems =
        device == "reference"
            ? ir::interpret(*module->kernels()[0], args, config)
            : test::run_on_device(test::shared_device(device), *module->kernels()[0], args, config);
    EXPECT_TRUE(problems.empty()) << device << ":\n" << ir::to_string(problems);
    out.bytes.resize(inputs.size() * out_bytes);
    return out.bytes;
  }

  /// cast(inputs) on this test's device is bit-identical to the reference's.
  void expect_table(Scalar from, Scalar to, const std::vector<uint64_t> &inputs,
                    unsigned lanes = 1) {
    std::vector<uint8_t> want = convert("reference", from, to, lanes, inputs);
    std::vector<uint8_t> got = convert(GetParam(), from, to, lanes, inputs);
    ASSERT_EQ(got.size(), want.size());
    unsigned out_bytes = ir::scalar_bits(to) / 8;
    size_t mismatches = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      uint64_t g = 0, w = 0;
      std::memcpy(&g, got.data() + i * out_bytes, out_bytes);
      std::memcpy(&w, want.data() + i * out_bytes, out_bytes);
      if (g != w && mismatches++ < 8)
        ADD_FAILURE() << fmt::format("{}: cast {} 0x{:x} to {}: got 0x{:x}, the interpreter 0x{:x}",
                                     GetParam(), type_name(from, lanes), inputs[i],
                                     type_name(to, lanes), g, w);
    }
    EXPECT_EQ(mismatches, 0u) << GetParam() << ": cast " << type_name(from, lanes) << " to "
                              << type_name(to, lanes);
  }
};

TEST_P(StorageFloats, every_encoding_converts_to_every_float_type_as_the_interpreter_does) {
  for (Scalar s : kStorage) {
    for (Scalar to : {Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::F64})
      expect_table(s, to, test::every_pattern(8));
    for (Scalar to : kStorage)
      expect_table(s, to, test::every_pattern(8));
  }
}

TEST_P(StorageFloats, every_f16_and_bf16_value_converts_as_the_interpreter_does) {
  for (Scalar s : kStorage) {
    expect_table(Scalar::F16, s, test::every_pattern(16));
    expect_table(Scalar::BF16, s, test::every_pattern(16));
  }
}

TEST_P(StorageFloats, f32_and_f64_values_convert_as_the_interpreter_does) {
  std::vector<uint64_t> f32 = test::rounding_point_samples(Scalar::F32, 8192),
                        f64 = test::rounding_point_samples(Scalar::F64, 8192);
  for (Scalar s : kStorage) {
    expect_table(Scalar::F32, s, f32);
    expect_table(Scalar::F64, s, f64);
  }
}

TEST_P(StorageFloats, four_lane_vectors_convert_lane_by_lane) {
  std::vector<uint64_t> f32 = test::rounding_point_samples(Scalar::F32, 8192);
  for (Scalar s : kStorage) {
    expect_table(s, Scalar::F32, test::every_pattern(8), 4);
    expect_table(Scalar::F32, s, f32, 4);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, StorageFloats,
                         ::testing::Values("interp", "vulkan", "cpu", "cuda", "hip"),
                         [](const auto &info) { return info.param; });

} // namespace
