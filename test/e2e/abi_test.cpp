//===- abi_test.cpp - Kernel parameters reach the device: every kind, and big blocks
//-----------===//
//
// Value parameters of every width (bool, 8/16/64-bit integers, f16, f64, vectors) travel in the
// parameter block of kernel_abi.h; a block over the device's push-constant limit (128 bytes on
// lavapipe) moves to a storage buffer. Each kernel writes its parameters back to a buffer, and the
// vulkan device must agree with the interpreter.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "test_support.h"

#include <cstring>

using namespace cubecc;

namespace {

/// Runs `text`'s kernel on the reference interpreter and on `device` with one u64 output
/// buffer of `slots` elements and the value arguments `values`; returns both outputs.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>>
run_both(const std::string &text, const std::string &device, size_t slots,
         const std::vector<std::vector<uint64_t>> &values) {
  auto module = test::parse_valid(text);
  if (!module)
    return {};
  auto run = [&](bool reference) {
    ir::HostBuffer out{ir::Scalar::U64, std::vector<uint8_t>(slots * 8, 0xee)};
    std::vector<ir::Argument> args = {{&out, {}}};
    for (const auto &v : values)
      args.push_back({nullptr, v});
    ir::LaunchConfig config;
    config.subgroup_size = 8;
    auto problems = reference ? ir::interpret(*module->kernels()[0], args, config)
                              : test::run_on_device(test::shared_device(device),
                                                    *module->kernels()[0], args, config);
    EXPECT_TRUE(problems.empty()) << ir::to_string(problems);
    return out.bytes;
  };
  return {run(true), run(false)};
}

class Abi : public testing::TestWithParam<std::string> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam()); }
};

TEST_P(Abi, values_of_every_width_reach_the_kernel) {
  const char *text = R"(module @abi {
  kernel @k(%out: buffer<u64, readwrite>, %b: bool, %i8: i8, %u16: u16, %h: f16, %i: i32,
            %d: f64, %l: i64, %v: u32x3, %w: i16x2) {
    %c0 = const 0 : u32
    %bv = cast %b : u64
    store %out, %c0, %bv
    %c1 = const 1 : u32
    %x1 = cast %i8 : u64
    store %out, %c1, %x1
    %c2 = const 2 : u32
    %x2 = cast %u16 : u64
    store %out, %c2, %x2
    %c3 = const 3 : u32
    %hb = bitcast %h : u16
    %x3 = cast %hb : u64
    store %out, %c3, %x3
    %c4 = const 4 : u32
    %x4 = cast %i : u64
    store %out, %c4, %x4
    %c5 = const 5 : u32
    %x5 = bitcast %d : u64
    store %out, %c5, %x5
    %c6 = const 6 : u32
    %x6 = bitcast %l : u64
    store %out, %c6, %x6
    %c7 = const 7 : u32
    %v2 = vec.extract %v {lane = 2} : u32
    %x7 = cast %v2 : u64
    store %out, %c7, %x7
    %c8 = const 8 : u32
    %w1 = vec.extract %w {lane = 1} : i16
    %x8 = cast %w1 : u64
    store %out, %c8, %x8
    return
  }
})";
  auto [want, got] = run_both(text, GetParam(), 9,
                              {{1},
                               {0xfe},
                               {0xbeef},
                               {0x3c00},
                               {0xfffffff9u},
                               {0x400921fb54442d18ull},
                               {0x8000000000000001ull},
                               {1, 2, 0xdeadbeef},
                               {0x7fff, 0x8001}});
  ASSERT_FALSE(want.empty());
  std::vector<uint64_t> w(9), g(9);
  std::memcpy(w.data(), want.data(), 72);
  std::memcpy(g.data(), got.data(), 72);
  EXPECT_EQ(w, (std::vector<uint64_t>{1, 0xfffffffffffffffeull, 0xbeef, 0x3c00,
                                      0xfffffffffffffff9ull, 0x400921fb54442d18ull,
                                      0x8000000000000001ull, 0xdeadbeef, 0xffffffffffff8001ull}));
  EXPECT_EQ(g, w);
}

TEST_P(Abi, a_parameter_block_over_the_push_constant_limit_still_arrives) {
  // 20 u64 parameters: 160 bytes of parameters, over lavapipe's 128.
  std::string params, body;
  std::vector<std::vector<uint64_t>> values;
  for (int p = 0; p < 20; ++p) {
    params += ", %p" + std::to_string(p) + ": u64";
    body += "    %c" + std::to_string(p) + " = const " + std::to_string(p) + " : u32\n" +
            "    store %out, %c" + std::to_string(p) + ", %p" + std::to_string(p) + "\n";
    values.push_back({0x1000000000000000ull * (p % 8) + 0x1234567u * p + 1});
  }
  auto [want, got] = run_both("module @abi {\n  kernel @k(%out: buffer<u64, readwrite>" + params +
                                  ") {\n" + body + "    return\n  }\n}\n",
                              GetParam(), 20, values);
  ASSERT_FALSE(want.empty());
  for (int p = 0; p < 20; ++p) {
    uint64_t w, g;
    std::memcpy(&w, want.data() + 8 * p, 8);
    std::memcpy(&g, got.data() + 8 * p, 8);
    EXPECT_EQ(w, values[p][0]) << "parameter " << p;
    EXPECT_EQ(g, values[p][0]) << "parameter " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Abi, testing::Values("interp", "vulkan", "cpu", "cuda", "hip"),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
