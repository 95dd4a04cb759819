//===- bf16_test.cpp - bf16, emulated by the SPIR-V writer, against the interpreter -----------===//
//
// Vulkan has no bf16 type: the SPIR-V writer stores bf16 as its 16 bits and computes in f32,
// rounding once to bf16 after every rounding op. For +, -, *, /, sqrt that single rounding is the
// correctly rounded bf16 result, so those must match the interpreter (which computes bf16
// exactly) bit for bit, as must loads, stores, parameters, casts from f32/f64/integers (through
// f64 and round-to-odd) and bitcasts. Inputs avoid subnormals (lavapipe flushes them). The same
// kernel runs on cuda and hip where they open (the C-family emitter's bf16), skipped elsewhere.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/float16.h"
#include "test_support.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace cubecc;

namespace {

constexpr uint32_t kCount = 256;

const char *kKernel = R"(module @bf16 {
  kernel @ops(%a: buffer<bf16, read>, %b: buffer<bf16, read>, %d: buffer<f64, read>,
              %n: buffer<i32, read>, %out: buffer<bf16, readwrite>, %bits: buffer<u16, readwrite>,
              %s: bf16) workgroup(64, 1, 1) {
    %g = global_id : u32x3
    %i = vec.extract %g {lane = 0} : u32
    %x = load %a, %i : bf16
    %y = load %b, %i : bf16
    %c8 = const 8 : u32
    %base = mul %i, %c8 : u32
    %sum = add %x, %y : bf16
    store %out, %base, %sum
    %c1 = const 1 : u32
    %o1 = add %base, %c1 : u32
    %prod = mul %x, %y : bf16
    store %out, %o1, %prod
    %c2 = const 2 : u32
    %o2 = add %base, %c2 : u32
    %quot = div %x, %y : bf16
    store %out, %o2, %quot
    %c3 = const 3 : u32
    %o3 = add %base, %c3 : u32
    %ax = abs %x : bf16
    %root = sqrt %ax : bf16
    store %out, %o3, %root
    %c4 = const 4 : u32
    %o4 = add %base, %c4 : u32
    %dv = load %d, %i : f64
    %fromd = cast %dv : bf16
    store %out, %o4, %fromd
    %c5 = const 5 : u32
    %o5 = add %base, %c5 : u32
    %nv = load %n, %i : i32
    %fromi = cast %nv : bf16
    store %out, %o5, %fromi
    %c6 = const 6 : u32
    %o6 = add %base, %c6 : u32
    %scaled = sub %x, %s : bf16
    store %out, %o6, %scaled
    %c7 = const 7 : u32
    %o7 = add %base, %c7 : u32
    %m = max %x, %y : bf16
    %h = const 0x3f00 : bf16
    %mh = mul %m, %h : bf16
    store %out, %o7, %mh
    %raw = bitcast %sum : u16
    store %bits, %i, %raw
    return
  }
})";

uint16_t bf16(float f) {
  return ir::float_to_bf16_bits(f);
}

void check_matches_the_interpreter(std::initializer_list<const char *> devices) {
  auto module = test::parse_valid(kKernel);
  ASSERT_TRUE(module);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-100, 100);
  std::vector<uint16_t> a(kCount), b(kCount);
  std::vector<double> d(kCount);
  std::vector<int32_t> n(kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    a[i] = bf16(value(rng));
    b[i] = bf16(value(rng));
    if (i % 16 == 0)
      b[i] = bf16(0.0f); // division by zero: inf or NaN, both sides
    // Values near bf16 halfway points, where a double rounding through f32 would go wrong.
    d[i] = std::ldexp(1.0 + (2 * (rng() % 128) + 1) / 256.0 + std::ldexp(1.0, -40), i % 20);
    n[i] = static_cast<int32_t>(rng());
  }
  auto run = [&](const std::string &device_name) {
    std::vector<ir::HostBuffer> buffers = {{ir::Scalar::BF16, std::vector<uint8_t>(kCount * 2)},
                                           {ir::Scalar::BF16, std::vector<uint8_t>(kCount * 2)},
                                           {ir::Scalar::F64, std::vector<uint8_t>(kCount * 8)},
                                           {ir::Scalar::I32, std::vector<uint8_t>(kCount * 4)},
                                           {ir::Scalar::BF16, std::vector<uint8_t>(kCount * 16)},
                                           {ir::Scalar::U16, std::vector<uint8_t>(kCount * 2)}};
    std::memcpy(buffers[0].bytes.data(), a.data(), kCount * 2);
    std::memcpy(buffers[1].bytes.data(), b.data(), kCount * 2);
    std::memcpy(buffers[2].bytes.data(), d.data(), kCount * 8);
    std::memcpy(buffers[3].bytes.data(), n.data(), kCount * 4);
    std::vector<ir::Argument> args;
    for (ir::HostBuffer &buffer : buffers)
      args.push_back({&buffer, {}});
    args.push_back({nullptr, {bf16(1.5f)}});
    ir::LaunchConfig config;
    config.num_workgroups = {kCount / 64, 1, 1};
    config.subgroup_size = 8;
    std::vector<ir::Diagnostic> problems =
        device_name == "reference" ? ir::interpret(*module->kernels()[0], args, config)
                                   : test::run_on_device(test::shared_device(device_name),
                                                         *module->kernels()[0], args, config);
    EXPECT_TRUE(problems.empty()) << device_name << ":\n" << ir::to_string(problems);
    return std::make_pair(buffers[4].bytes, buffers[5].bytes);
  };
  auto want = run("reference");
  for (const char *device : devices) {
    auto got = run(device);
    size_t mismatches = 0;
    const char *what[] = {"add",      "mul",      "div",       "sqrt",
                          "cast f64", "cast i32", "sub param", "max * 0.5"};
    for (size_t e = 0; e < kCount * 8; ++e) {
      uint16_t g, w;
      std::memcpy(&g, got.first.data() + 2 * e, 2);
      std::memcpy(&w, want.first.data() + 2 * e, 2);
      bool both_nan = (g & 0x7fff) > 0x7f80 && (w & 0x7fff) > 0x7f80;
      if (g != w && !both_nan && mismatches++ < 10)
        ADD_FAILURE() << device << ": " << what[e % 8] << " at element " << e / 8 << ": got 0x"
                      << std::hex << g << ", expected 0x" << w;
    }
    EXPECT_EQ(mismatches, 0u) << device;
    EXPECT_EQ(got.second, want.second) << device << ": bitcast bf16 -> u16";
  }
}

TEST(Bf16, emulated_on_vulkan_matches_the_interpreter_bit_for_bit) {
  check_matches_the_interpreter({"interp", "vulkan"});
}

// CUDA and HIP have bf16 types of their own; the C-family emitter rounds once per op as well.
TEST(Bf16, on_cuda_matches_the_interpreter_bit_for_bit) {
  CUBECC_SKIP_IF_DEVICE_ABSENT("cuda");
  check_matches_the_interpreter({"cuda"});
}

TEST(Bf16, on_hip_matches_the_interpreter_bit_for_bit) {
  CUBECC_SKIP_IF_DEVICE_ABSENT("hip");
  check_matches_the_interpreter({"hip"});
}

} // namespace
