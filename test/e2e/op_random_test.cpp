//===- op_random_test.cpp - Random kernels on vulkan against the reference interpreter -------===//
//
// Random kernels (test/unit/random_ir.h: ifs, loops with break/continue, shared memory with
// barriers, subgroup operations, stores under branches) run on the vulkan device and in the
// reference interpreter with the device's subgroup size, at -O0 and -O2; every output word must
// be identical. CUBECC_E2E_RANDOM_KERNELS sets the number of seeds per level (default 150),
// CUBECC_E2E_RANDOM_SEED the first seed. A mismatch prints the seed, the level, the first words
// that differ and the kernel's IR.
//
// What docs/ir.md leaves open and the generator can reach, and how it is handled:
// - Subgroup ops in the generator are on u32 only (no float reduction order).
// - Float ops are add sub mul div min max fma neg abs sqrt floor ceil round: correctly rounded
//   on lavapipe (div and sqrt measured exact in ops_test.cpp), so no tolerance is needed.
// - The generator can reach results docs/ir.md leaves open: shift amounts >= 32, integer
//   division by 0 and MIN / -1, NaN sign and payload, subnormal f32 results (lavapipe flushes
//   them), min/max of -0.0 and +0.0. The outputs are hashes, so no tolerance can apply. When a
//   kernel's outputs differ, both the device and the reference rerun a copy of it with exactly
//   those results pinned down (specified_copy below); the copies must agree bit for bit. Anything
//   else that differs (a wrong value, a lost signed zero, a wrong subgroup result) still fails.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/device.h"
#include "device_launcher.h"
#include "random_ir.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <sstream>
#include <tuple>

namespace cubecc::test {
namespace {

uint64_t env_or(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

constexpr uint32_t kWorkgroups = 2;

std::vector<uint8_t> launch(const ir::Kernel &kernel, const RandomInputs &in,
                            runtime::Device *device, uint32_t subgroup_size,
                            std::string &problems) {
  RandomInputs copy = in;
  ir::HostBuffer out{ir::Scalar::U32,
                     std::vector<uint8_t>(kWorkgroups * kRandomWorkgroup * kRandomSlots * 4, 0)};
  ir::Argument args[] = {
      {&copy.ints, {}}, {&copy.floats, {}}, {&out, {}}, {nullptr, {static_cast<uint32_t>(copy.n)}}};
  ir::LaunchConfig config;
  config.num_workgroups = {kWorkgroups, 1, 1};
  config.subgroup_size = subgroup_size;
  problems = ir::to_string(device ? run_on_device(*device, kernel, args, config)
                                  : ir::interpret(kernel, args, config));
  return out.bytes;
}

/// A copy of the kernel's text in which the results docs/ir.md leaves open are pinned down, the
/// same way for the device and the reference: integer shift amounts are masked to the width
/// (amounts >= the width give an unspecified value, 4.3), integer divisors 0 and -1 become 1
/// (division by zero and MIN / -1 are unspecified, 4.2), and every f32 result is passed through
/// a select that turns a NaN into the canonical quiet NaN (NaN sign and payload are not
/// specified) and a subnormal into a zero of its sign (devices may flush them, 4.2); min and max
/// of -0.0 and +0.0 (either may come back, 4.2) pick by the bits. Signed zeros, infinities and
/// every other value are kept, so a real difference stays visible.
std::string specified_copy(const std::string &text) {
  std::istringstream lines(text);
  std::ostringstream out;
  static const std::regex f32_def(R"(^(\s*)(%[A-Za-z0-9_.]+) = (.*) : f32$)");
  static const std::regex int_op(
      R"(^(\s*)(%[A-Za-z0-9_.]+) = (shl|shr|div|rem) (%[A-Za-z0-9_.]+), (%[A-Za-z0-9_.]+) : (i32|u32)$)");
  unsigned n = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    std::string k = fmt::format("%spec{}_", n++);
    if (std::regex_match(line, m, int_op)) {
      std::string indent = m[1], v = m[2], op = m[3], a = m[4], b = m[5], t = m[6];
      if (op == "shl" || op == "shr") {
        out << indent << k << "w = const 31 : " << t << "\n"
            << indent << k << "n = and " << b << ", " << k << "w : " << t << "\n"
            << indent << v << " = " << op << " " << a << ", " << k << "n : " << t << "\n";
      } else {
        out << indent << k << "zero = const 0 : " << t << "\n"
            << indent << k << "one = const 1 : " << t << "\n"
            << indent << k << "all = const 4294967295 : u32\n"
            << indent << k << "allt = bitcast " << k << "all : " << t << "\n"
            << indent << k << "z = eq " << b << ", " << k << "zero : bool\n"
            << indent << k << "m = eq " << b << ", " << k << "allt : bool\n"
            << indent << k << "bad = or " << k << "z, " << k << "m : bool\n"
            << indent << k << "d = select " << k << "bad, " << k << "one, " << b << " : " << t
            << "\n"
            << indent << v << " = " << op << " " << a << ", " << k << "d : " << t << "\n";
      }
      continue;
    }
    if (std::regex_match(line, m, f32_def) && m[3].str().rfind("const", 0) != 0 &&
        m[3].str().rfind("if ", 0) != 0 && m[3].str().rfind("for ", 0) != 0 &&
        m[3].str().rfind("while ", 0) != 0) {
      std::string indent = m[1], v = m[2], raw = k + "raw", expr = m[3];
      std::smatch mm;
      static const std::regex min_max(R"(^(min|max) (%[A-Za-z0-9_.]+), (%[A-Za-z0-9_.]+)$)");
      if (std::regex_match(expr, mm, min_max)) {
        // min/max of -0.0 and +0.0 may be either (4.2): pick by the bits, as the reference does
        // (min: -0.0, max: +0.0); equal non-zero values have equal bits.
        std::string a = mm[2], b = mm[3];
        out << indent << k << "mm = " << expr << " : f32\n"
            << indent << k << "same = eq " << a << ", " << b << " : bool\n"
            << indent << k << "ab = bitcast " << a << " : u32\n"
            << indent << k << "bb = bitcast " << b << " : u32\n"
            << indent << k << "pick = " << (mm[1] == "min" ? "or" : "and") << " " << k << "ab, "
            << k << "bb : u32\n"
            << indent << k << "pf = bitcast " << k << "pick : f32\n";
        expr = "select " + k + "same, " + k + "pf, " + k + "mm";
      }
      // On the bits, in integers: a compiler may treat any NaN as any other (LLVM does), so a
      // float select between NaNs could be folded away.
      out << indent << raw << " = " << expr << " : f32\n"
          << indent << k << "bits = bitcast " << raw << " : u32\n"
          << indent << k << "absmask = const 2147483647 : u32\n"
          << indent << k << "abs = and " << k << "bits, " << k << "absmask : u32\n"
          << indent << k << "inf = const 2139095040 : u32\n"
          << indent << k << "isnan = gt " << k << "abs, " << k << "inf : bool\n"
          << indent << k << "smallest = const 8388608 : u32\n"
          << indent << k << "tiny = lt " << k << "abs, " << k << "smallest : bool\n"
          << indent << k << "signmask = const 2147483648 : u32\n"
          << indent << k << "sign = and " << k << "bits, " << k << "signmask : u32\n"
          << indent << k << "flushed = select " << k << "tiny, " << k << "sign, " << k
          << "bits : u32\n"
          << indent << k << "qnan = const 2143289344 : u32\n"
          << indent << k << "pinned = select " << k << "isnan, " << k << "qnan, " << k
          << "flushed : u32\n"
          << indent << v << " = bitcast " << k << "pinned : f32\n";
      continue;
    }
    out << line << "\n";
  }
  return out.str();
}

void optimize(ir::Module &module, int level) {
  auto errors = passes::optimize(module, level);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
}

std::unique_ptr<ir::Module> build(const std::string &text, int level, std::string &error) {
  ir::ParseResult r = ir::parse_module(text, "random.cir");
  if (!r.module) {
    error = ir::to_string(r.errors);
    return nullptr;
  }
  auto problems = ir::verify(*r.module, &r.source_map);
  if (!problems.empty()) {
    error = ir::to_string(problems);
    return nullptr;
  }
  if (level > 0)
    optimize(*r.module, level);
  return std::move(r.module);
}

std::string first_differences(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want) {
  std::string text;
  size_t shown = 0;
  for (size_t w = 0; w * 4 < got.size() && shown < 6; ++w) {
    uint32_t g, e;
    std::memcpy(&g, &got[w * 4], 4);
    std::memcpy(&e, &want[w * 4], 4);
    if (g != e) {
      text += fmt::format("\n  out[{}] (invocation {}, slot {}): got {:#010x}, expected {:#010x}",
                          w, w / kRandomSlots, w % kRandomSlots, g, e);
      ++shown;
    }
  }
  return text;
}

/// (device, optimization level); cuda is skipped where it cannot open, vulkan is required.
class RandomKernels : public testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RandomKernels, MatchTheReferenceInterpreter) {
  const std::string &device_name = std::get<0>(GetParam());
  int level = std::get<1>(GetParam());
  runtime::Device *device = nullptr;
  if (device_name != "vulkan") {
    CUBECC_SKIP_IF_DEVICE_ABSENT(device_name);
    device = &shared_device(device_name);
  } else {
    try {
      device = &shared_device("vulkan");
    } catch (const runtime::Error &e) {
#ifdef CUBECC_HAVE_VULKAN
      FAIL() << "cannot open the vulkan device: " << e.what();
#else
      GTEST_SKIP() << "built without the Vulkan backend: " << e.what();
#endif
    }
  }
  uint32_t subgroup_size = device->info().subgroup_size;
  uint64_t count = env_or("CUBECC_E2E_RANDOM_KERNELS", 150);
  uint64_t first = env_or("CUBECC_E2E_RANDOM_SEED", 1);
  size_t unspecified = 0, failures = 0;
  for (uint64_t seed = first; seed < first + count && failures < 5; ++seed) {
    std::string text = random_kernel(seed), error;
    auto module = build(text, level, error);
    ASSERT_TRUE(module) << "seed " << seed << ": " << error << "\n" << text;
    const ir::Kernel &kernel = *module->kernels()[0];
    RandomInputs in = random_inputs(seed);
    std::string reference_problems, device_problems;
    auto want = launch(kernel, in, nullptr, subgroup_size, reference_problems);
    ASSERT_TRUE(reference_problems.empty()) << "seed " << seed << ": " << reference_problems;
    auto got = launch(kernel, in, device, subgroup_size, device_problems);
    if (!device_problems.empty()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << " -O" << level << ": " << device_problems << "\n"
                    << ir::to_string(*module);
      continue;
    }
    if (got == want)
      continue;
    // The outputs differ: where only what docs/ir.md leaves open differs, the specified copy
    // (run on both) agrees.
    std::string spec_text = specified_copy(ir::to_string(*module));
    auto spec_module = build(spec_text, 0, error);
    ASSERT_TRUE(spec_module) << "specified copy of seed " << seed << ": " << error << "\n"
                             << spec_text;
    std::string spec_problems, spec_device_problems;
    auto spec_want = launch(*spec_module->kernels()[0], in, nullptr, subgroup_size, spec_problems);
    auto spec_got =
        launch(*spec_module->kernels()[0], in, device, subgroup_size, spec_device_problems);
    ASSERT_TRUE(spec_problems.empty() && spec_device_problems.empty())
        << "seed " << seed << ": " << spec_problems << spec_device_problems;
    if (spec_got == spec_want) {
      ++unspecified;
      continue;
    }
    got = spec_got;
    want = spec_want;
    ++failures;
    ADD_FAILURE() << "seed " << seed << " -O" << level << ": " << device_name
                  << " differs from the reference interpreter (subgroup size " << subgroup_size
                  << ")" << first_differences(got, want) << "\n"
                  << ir::to_string(*module);
  }
  std::printf("[random] %s -O%d: %llu kernels, %zu differed only in results docs/ir.md leaves "
              "open\n",
              device_name.c_str(), level, static_cast<unsigned long long>(count), unspecified);
}

INSTANTIATE_TEST_SUITE_P(Levels, RandomKernels,
                         testing::Combine(testing::Values("vulkan", "cuda"), testing::Values(0, 2)),
                         [](const auto &info) {
                           return std::get<0>(info.param) + "_O" +
                                  std::to_string(std::get<1>(info.param));
                         });

} // namespace
} // namespace cubecc::test
