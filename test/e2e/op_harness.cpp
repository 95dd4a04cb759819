//===- op_harness.cpp -------------------------------------------------------------------------===//
#include "op_harness.h"

#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/device.h"
#include "device_launcher.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace cubecc::test::ops {

Stats &stats() {
  static Stats s;
  return s;
}

//===--- Float helpers ---------------------------------------------------------------------===//

namespace {

unsigned mantissa_bits(Scalar s) {
  switch (s) {
  case Scalar::F16:
    return 10;
  case Scalar::BF16:
    return 7;
  case Scalar::F32:
    return 23;
  default:
    return 52;
  }
}

int min_exponent(Scalar s) {
  switch (s) {
  case Scalar::F16:
    return -14;
  case Scalar::F32:
  case Scalar::BF16:
    return -126;
  default:
    return -1022;
  }
}

uint64_t sign_bit(Scalar s) {
  return uint64_t(1) << (ir::scalar_bits(s) - 1);
}

} // namespace

bool is_nan(Scalar s, uint64_t bits) {
  return ir::is_float(s) && std::isnan(to_double(s, bits));
}

bool is_subnormal(Scalar s, uint64_t bits) {
  if (!ir::is_float(s))
    return false;
  uint64_t magnitude = bits & (sign_bit(s) - 1);
  return magnitude != 0 && (magnitude >> mantissa_bits(s)) == 0;
}

double ulp_distance(Scalar s, uint64_t a, uint64_t b) {
  // In integers: a double holds only 53 bits, so f64 bit patterns (63-bit magnitudes) converted
  // to double first would count a 1-ULP difference as 0 or 512.
  auto ordered = [&](uint64_t x) {
    auto magnitude = static_cast<__int128>(x & (sign_bit(s) - 1));
    return (x & sign_bit(s)) ? -magnitude : magnitude;
  };
  __int128 d = ordered(a) - ordered(b);
  return static_cast<double>(d < 0 ? -d : d);
}

double ulp_of(Scalar s, double v) {
  int e = v == 0 || !std::isfinite(v) ? min_exponent(s) : std::max(std::ilogb(v), min_exponent(s));
  return std::ldexp(1.0, e - static_cast<int>(mantissa_bits(s)));
}

std::string show(Scalar s, uint64_t bits) {
  unsigned w = ir::scalar_bits(s);
  if (ir::is_float(s))
    return fmt::format("{:.{}g} ({:#0{}x})", to_double(s, bits), s == Scalar::F64 ? 17 : 9, bits,
                       w / 4 + 2);
  if (ir::is_signed(s))
    return fmt::format("{} ({:#0{}x})", ir::sign_extend(bits, w), bits, w / 4 + 2);
  return fmt::format("{} ({:#0{}x})", bits, bits, w / 4 + 2);
}

//===--- Text ------------------------------------------------------------------------------===//

std::string module_text(const std::string &kernel, const std::string &params,
                        const std::string &body, std::array<uint32_t, 3> workgroup) {
  std::string text = fmt::format("module @ops {{\n  kernel @{}({}) workgroup({}, {}, {}) {{\n",
                                 kernel, params, workgroup[0], workgroup[1], workgroup[2]);
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);)
    text += "    " + line + "\n";
  return text + "    return\n  }\n}\n";
}

std::string Body::op(const std::string &op, const std::string &type) {
  std::string name = fmt::format("%t{}", next_++);
  text_ += fmt::format("{} = {} : {}\n", name, op, type);
  return name;
}

void Body::line(const std::string &text) {
  text_ += text + "\n";
}

std::string Body::constant(const std::string &literal, const std::string &type) {
  return op("const " + literal, type);
}

//===--- Running and comparing -------------------------------------------------------------===//

namespace {

ir::HostBuffer host_buffer(const Buffer &b) {
  ir::HostBuffer h;
  h.element = b.element;
  size_t bytes = ir::scalar_bits(b.element) / 8;
  h.bytes.resize(b.init.size() * bytes);
  for (size_t i = 0; i < b.init.size(); ++i)
    std::memcpy(h.bytes.data() + i * bytes, &b.init[i], bytes);
  return h;
}

uint64_t element(const ir::HostBuffer &h, size_t i) {
  size_t bytes = ir::scalar_bits(h.element) / 8;
  uint64_t v = 0;
  std::memcpy(&v, h.bytes.data() + i * bytes, bytes);
  return v;
}

std::vector<ir::Argument> arguments(const OpCase &c, std::vector<ir::HostBuffer> &buffers) {
  std::vector<ir::Argument> args;
  for (const Arg &a : c.args)
    args.push_back(a.buffer >= 0 ? ir::Argument{&buffers[a.buffer], {}}
                                 : ir::Argument{nullptr, a.bits});
  return args;
}

/// Whether `got` is an allowed result for element i of a range; records the error when a
/// tolerance applies.
bool allowed(Scalar s, const Check &check, size_t i, uint64_t got, uint64_t want,
             std::pair<double, double> &max_error) {
  if (got == want)
    return true;
  if (check.also_allowed && check.also_allowed(i, got, want))
    return true;
  if (check.kind == Check::Kind::Bits || !ir::is_float(s))
    return false;
  if (is_nan(s, want) || is_nan(s, got))
    return is_nan(s, want) && is_nan(s, got);
  if (is_subnormal(s, want) && (got & (sign_bit(s) - 1)) == 0)
    return true; // the device flushed a subnormal result to zero
  double g = to_double(s, got), w = to_double(s, want);
  if (!check.tolerance || std::isinf(g) || std::isinf(w))
    return false; // exact ops, and infinities, must match exactly
  Tolerance t = check.tolerance(i);
  double ulps = ulp_distance(s, got, want), abs = std::fabs(g - w);
  max_error.first = std::max(max_error.first, ulps);
  max_error.second = std::max(max_error.second, abs);
  return ulps <= t.ulps || abs <= t.abs;
}

void optimize(ir::Module &module, int level) {
  auto errors = passes::optimize(module, level);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
}

} // namespace

void run_op_case(const OpCase &c, const std::string &device_name) {
  // CUBECC_OPS_KERNEL=<substring> runs only the matching kernels (for debugging one case).
  const char *only = std::getenv("CUBECC_OPS_KERNEL");
  if (only && c.name.find(only) == std::string::npos)
    return;
  auto start = std::chrono::steady_clock::now();
  struct Timer {
    const OpCase &c;
    const std::string &device;
    std::chrono::steady_clock::time_point start;
    ~Timer() {
      if (std::getenv("CUBECC_OPS_VERBOSE"))
        std::printf(
            "[ops] %s on %s: %.0f ms\n", c.name.c_str(), device.c_str(),
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
    }
  } timer{c, device_name, start};
  SCOPED_TRACE(fmt::format("kernel {} on {}", c.name, device_name));
  ir::ParseResult parsed = ir::parse_module(c.text, c.name + ".cir");
  ASSERT_TRUE(parsed.module) << ir::to_string(parsed.errors) << "\n" << c.text;
  auto problems = ir::verify(*parsed.module, &parsed.source_map);
  ASSERT_TRUE(problems.empty()) << ir::to_string(problems) << "\n" << c.text;
  if (c.opt_level > 0) {
    optimize(*parsed.module, c.opt_level);
    if (testing::Test::HasFatalFailure())
      return;
  }
  const ir::Kernel &kernel = *parsed.module->kernels()[0];

  runtime::Device *device = nullptr;
  try {
    device = &shared_device(device_name);
  } catch (const runtime::Error &e) {
#ifdef CUBECC_HAVE_VULKAN
    FAIL() << "cannot open device " << device_name << ": " << e.what();
#else
    if (device_name == "vulkan")
      GTEST_SKIP() << "built without the Vulkan backend: " << e.what();
    FAIL() << "cannot open device " << device_name << ": " << e.what();
#endif
  }

  std::vector<ir::HostBuffer> reference, result;
  for (const Buffer &b : c.buffers) {
    reference.push_back(host_buffer(b));
    result.push_back(host_buffer(b));
  }
  std::vector<ir::Argument> reference_args = arguments(c, reference);
  std::vector<ir::Argument> result_args = arguments(c, result);
  ir::LaunchConfig config;
  config.num_workgroups = c.grid;
  config.subgroup_size = device->info().subgroup_size;
  auto reference_problems = ir::interpret(kernel, reference_args, config);
  ASSERT_TRUE(reference_problems.empty())
      << "the reference interpreter failed (a bad case): " << ir::to_string(reference_problems)
      << "\n"
      << c.text;

  auto device_problems = run_on_device(*device, kernel, result_args, config);
  std::vector<std::string> refusal;
  if (c.refusal_for)
    refusal = c.refusal_for(device->info().features);
  else if (device->info().backend == "vulkan")
    refusal = c.vulkan_refusal;
  if (!refusal.empty()) {
    ASSERT_EQ(device_problems.size(), 1u) << device_name << " ran a kernel it must refuse:\n"
                                          << c.text;
    const std::string &message = device_problems[0].message;
    EXPECT_NE(message.find("does not support"), std::string::npos) << message;
    EXPECT_NE(message.find(c.name), std::string::npos)
        << "the refusal names no kernel: " << message;
    for (const std::string &part : refusal)
      EXPECT_NE(message.find(part), std::string::npos)
          << "the refusal does not mention '" << part << "': " << message;
    ++stats().refusals[device_name];
    return;
  }
  ASSERT_TRUE(device_problems.empty()) << ir::to_string(device_problems) << "\n" << c.text;
  ++stats().kernels[device_name];

  // Messages per range (CUBECC_OPS_MAX_MESSAGES, default 8); the count is always reported.
  const char *max_env = std::getenv("CUBECC_OPS_MAX_MESSAGES");
  size_t max_messages = max_env ? std::strtoull(max_env, nullptr, 10) : 8;
  for (size_t b = 0; b < c.buffers.size(); ++b) {
    const Buffer &buffer = c.buffers[b];
    if (!buffer.output)
      continue;
    // Every element belongs to one range; the ones outside the declared ranges are exact.
    std::vector<Range> ranges = buffer.ranges;
    std::vector<bool> covered(buffer.init.size());
    for (const Range &r : ranges)
      for (size_t i = r.begin; i < r.begin + r.count && i < covered.size(); ++i)
        covered[i] = true;
    for (size_t i = 0; i < covered.size(); ++i)
      if (!covered[i])
        ranges.push_back(Range{buffer.name + " (outside the op ranges)", i, 1, {}, {}});
    for (const Range &r : ranges) {
      size_t failures = 0;
      std::string messages;
      auto &max_error = stats().max_error[device_name + ": " + r.what];
      for (size_t k = 0; k < r.count; ++k) {
        size_t i = r.begin + k;
        uint64_t got = element(result[b], i), want = element(reference[b], i);
        ++stats().comparisons[device_name];
        if (allowed(buffer.element, r.check, k, got, want, max_error))
          continue;
        if (++failures <= max_messages)
          messages += fmt::format(
              "\n  kernel {}, {}, element {} ({}[{}]): inputs {}; got {}, expected {}{}", c.name,
              r.what, k, buffer.name, i, r.inputs ? r.inputs(k) : "-", show(buffer.element, got),
              show(buffer.element, want),
              r.check.bound.empty() ? "" : " (bound: " + r.check.bound + ")");
      }
      EXPECT_EQ(failures, 0u) << failures << " of " << r.count << " elements of '" << r.what
                              << "' differ from the reference on " << device_name << ":"
                              << messages;
    }
  }
}

} // namespace cubecc::test::ops
