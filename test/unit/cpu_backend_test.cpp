//===- cpu_backend_test.cpp - The LLVM CPU backend, differentially against the interpreter
//-----===//
//
// Every kernel here is compiled with compile_cpu for each CPU level this host runs, loaded from
// memory (memfd + dlopen), run over host buffers following cpu_abi.h, and compared with the
// reference interpreter run with the same subgroup size on the same inputs: bit for bit, except
// the transcendental functions, which are compared within the ULP bounds of docs/cpu.md.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cpu.h"
#include "cubecc/codegen/cpu_abi.h"
#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/ir/float16.h"
#include "cubecc/ir/interpreter.h"
#include "random_ir.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

namespace cubecc {
namespace {

using codegen::CpuBinary;
using ir::Argument;
using ir::HostBuffer;
using ir::Scalar;

/// The levels this host runs, oldest first.
std::vector<std::string> runnable_levels() {
  std::vector<std::string> out;
  std::string host = codegen::host_cpu_level();
  for (const std::string &level : codegen::cpu_levels()) {
    out.push_back(level);
    if (level == host)
      break;
  }
  return out;
}

unsigned width_of(const std::string &level) {
  return codegen::cpu_features(level).subgroup_size;
}

/// A compiled kernel, loaded from memory.
struct Loaded {
  void *handle = nullptr;
  cubecc_cpu_kernel_fn fn = nullptr;
  uint32_t subgroup_size = 0;
  uint32_t abi_version = 0;
  Loaded() = default;
  Loaded(const Loaded &) = delete;
  ~Loaded() {
    if (handle)
      dlclose(handle);
  }
};

bool load(const std::string &object, Loaded &out, std::string &error) {
  int fd = memfd_create("cubecc-cpu-kernel", MFD_CLOEXEC);
  if (fd < 0 || write(fd, object.data(), object.size()) != static_cast<ssize_t>(object.size())) {
    error = "memfd";
    return false;
  }
  std::string path = fmt::format("/proc/self/fd/{}", fd);
  out.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);
  if (!out.handle) {
    error = dlerror();
    return false;
  }
  out.fn = reinterpret_cast<cubecc_cpu_kernel_fn>(dlsym(out.handle, CUBECC_CPU_KERNEL_SYMBOL));
  auto *sg = static_cast<const uint32_t *>(dlsym(out.handle, CUBECC_CPU_SUBGROUP_SIZE_SYMBOL));
  auto *version = static_cast<const uint32_t *>(dlsym(out.handle, CUBECC_CPU_ABI_VERSION_SYMBOL));
  if (!out.fn || !sg || !version) {
    error = "missing symbols";
    return false;
  }
  out.subgroup_size = *sg;
  out.abi_version = *version;
  return true;
}

/// Runs a compiled kernel over `args` (buffers are written in place), all workgroups in order.
void run_cpu(const CpuBinary &binary, const Loaded &loaded, std::vector<Argument> &args,
             std::array<uint32_t, 3> groups, cubecc_cpu_fault *fault = nullptr) {
  const codegen::KernelAbi &abi = binary.abi;
  std::vector<void *> buffers(abi.num_buffers + 1);
  std::vector<uint64_t> counts(abi.num_buffers + 1);
  std::vector<uint8_t> params(abi.param_block_bytes + 8);
  for (size_t i = 0; i < abi.params.size(); ++i) {
    const codegen::ParamSlot &slot = abi.params[i];
    if (slot.kind == codegen::ParamSlot::Buffer) {
      buffers[slot.binding] = args[i].buffer->bytes.data();
      counts[slot.binding] = args[i].buffer->size();
    } else {
      codegen::pack_value(slot, args[i].bits.data(), params.data());
    }
  }
  size_t shared_bytes = (abi.shared_bytes + 63) / 64 * 64;
  void *shared = shared_bytes ? std::aligned_alloc(64, shared_bytes) : nullptr;
  if (shared)
    std::memset(shared, 0xCD, shared_bytes);
  cubecc_cpu_launch launch{};
  launch.buffers = buffers.data();
  launch.buffer_counts = counts.data();
  launch.params = params.data();
  launch.num_workgroups[0] = groups[0];
  launch.num_workgroups[1] = groups[1];
  launch.num_workgroups[2] = groups[2];
  launch.fault = fault;
  uint64_t total = uint64_t{groups[0]} * groups[1] * groups[2];
  loaded.fn(&launch, 0, total, shared);
  std::free(shared);
}

/// How outputs are compared: bit for bit, or floats of `element` within `ulps`.
struct Tolerance {
  Scalar element = Scalar::U8;
  uint64_t ulps = 0;
};

int64_t ordered(Scalar s, uint64_t bits) {
  unsigned w = ir::scalar_bits(s);
  int64_t v = static_cast<int64_t>(bits);
  uint64_t sign = uint64_t{1} << (w - 1);
  return (bits & sign) ? -static_cast<int64_t>(bits & (sign - 1)) : v;
}

void expect_buffers_equal(const HostBuffer &want, const HostBuffer &got, const std::string &what,
                          Tolerance tolerance) {
  ASSERT_EQ(want.bytes.size(), got.bytes.size()) << what;
  if (tolerance.ulps == 0 || want.element != tolerance.element) {
    size_t bytes = ir::scalar_bits(want.element) / 8;
    for (size_t i = 0; i < want.bytes.size(); i += bytes)
      if (std::memcmp(&want.bytes[i], &got.bytes[i], bytes) != 0) {
        uint64_t a = 0, b = 0;
        std::memcpy(&a, &want.bytes[i], bytes);
        std::memcpy(&b, &got.bytes[i], bytes);
        ADD_FAILURE() << what << ": element " << i / bytes << " is 0x" << std::hex << b
                      << ", the interpreter gives 0x" << a;
        return;
      }
    return;
  }
  size_t bytes = ir::scalar_bits(want.element) / 8;
  for (size_t i = 0; i < want.bytes.size(); i += bytes) {
    uint64_t a = 0, b = 0;
    std::memcpy(&a, &want.bytes[i], bytes);
    std::memcpy(&b, &got.bytes[i], bytes);
    double da = ir::to_double(want.element, a), db = ir::to_double(want.element, b);
    if (std::isnan(da) && std::isnan(db))
      continue;
    uint64_t distance =
        static_cast<uint64_t>(std::abs(ordered(want.element, a) - ordered(want.element, b)));
    if (distance > tolerance.ulps) {
      ADD_FAILURE() << what << ": element " << i / bytes << " is " << db
                    << ", the interpreter gives " << da << " (" << distance << " ulp apart)";
      return;
    }
  }
}

struct Case {
  std::string text;
  std::vector<Argument> args; ///< buffers point into `buffers`
  std::vector<HostBuffer> buffers;
  std::array<uint32_t, 3> groups = {1, 1, 1};
  Tolerance tolerance;
};

/// Compiles `c.text`'s first kernel for every runnable level, runs it and the interpreter on
/// copies of the inputs, and compares every buffer.
void expect_same_as_interpreter(const Case &c, const std::string &name = "kernel") {
  auto module = test::parse_valid(c.text);
  ASSERT_TRUE(module);
  const ir::Kernel &kernel = *module->kernels().front();
  for (const std::string &level : runnable_levels()) {
    SCOPED_TRACE(name + " at " + level);
    std::vector<ir::Diagnostic> errors;
    auto binary = codegen::compile_cpu(kernel, {level, false}, errors);
    ASSERT_TRUE(binary) << ir::to_string(errors);
    Loaded loaded;
    std::string why;
    ASSERT_TRUE(load(binary->object, loaded, why)) << why;
    ASSERT_EQ(loaded.subgroup_size, width_of(level));
    ASSERT_EQ(loaded.abi_version, CUBECC_CPU_ABI_VERSION);
    auto copy = [&](std::vector<HostBuffer> &storage) {
      storage = c.buffers;
      std::vector<Argument> args = c.args;
      size_t b = 0;
      for (Argument &a : args)
        if (a.buffer)
          a.buffer = &storage[b++];
      return args;
    };
    std::vector<HostBuffer> want_buffers, got_buffers;
    std::vector<Argument> want_args = copy(want_buffers), got_args = copy(got_buffers);
    ir::LaunchConfig config;
    config.num_workgroups = c.groups;
    config.subgroup_size = width_of(level);
    auto problems = ir::interpret(kernel, want_args, config);
    ASSERT_TRUE(problems.empty()) << ir::to_string(problems);
    run_cpu(*binary, loaded, got_args, c.groups);
    for (size_t b = 0; b < want_buffers.size(); ++b)
      expect_buffers_equal(want_buffers[b], got_buffers[b], fmt::format("buffer {}", b),
                           c.tolerance);
  }
}

template <class T> HostBuffer buffer_of(Scalar s, const std::vector<T> &values) {
  HostBuffer b{s, {}};
  b.bytes.resize(values.size() * sizeof(T));
  std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
  return b;
}

HostBuffer bits_buffer(Scalar s, const std::vector<uint64_t> &bits) {
  HostBuffer b{s, {}};
  size_t bytes = ir::scalar_bits(s) / 8;
  b.bytes.resize(bits.size() * bytes);
  for (size_t i = 0; i < bits.size(); ++i)
    std::memcpy(&b.bytes[i * bytes], &bits[i], bytes);
  return b;
}

/// Interesting bit patterns of each type: zeros, ones, extremes, NaNs, infinities, subnormals,
/// halfway cases, and random values.
std::vector<uint64_t> interesting(Scalar s, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  unsigned w = ir::scalar_bits(s);
  uint64_t m = ir::width_mask(w);
  std::vector<uint64_t> v;
  if (ir::is_float(s)) {
    for (double d : {0.0,  -0.0,    1.0,  -1.0,  0.5,          2.5,           -2.5,         3.75,
                     1e-3, 65504.0, 1e10, -1e30, INFINITY,     -INFINITY,     100.0,        7.0,
                     -3.0, 0.1,     1.5,  1e-40, 2147483648.0, -2147483904.0, 4294967296.0, 1e20})
      v.push_back(ir::from_double(s, d));
    v.push_back(s == Scalar::F32   ? 0x7fc00000
                : s == Scalar::F64 ? 0x7ff8000000000000
                : s == Scalar::F16 ? 0x7e00
                                   : 0x7fc0);
    v.push_back(s == Scalar::F32   ? 0xffc00001
                : s == Scalar::F64 ? 0xfff8000000000001
                : s == Scalar::F16 ? 0xfe01
                                   : 0xffc1);
    v.push_back(1);      // the smallest subnormal
    v.push_back(m >> 1); // a NaN with all payload bits
  } else {
    for (uint64_t x :
         {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, m, m - 1, m >> 1,
          (m >> 1) + 1, uint64_t{31}, uint64_t{32}, uint64_t{63}, uint64_t{64}, uint64_t{100}})
      v.push_back(x & m);
  }
  while (v.size() < count) {
    uint64_t r = rng() & m;
    if (ir::is_float(s) && rng() % 2) // mostly moderate values
      r = ir::from_double(s,
                          std::ldexp(static_cast<double>(static_cast<int32_t>(rng() % 2000) - 1000),
                                     static_cast<int>(rng() % 20) - 10));
    v.push_back(r);
  }
  v.resize(count);
  return v;
}

const Scalar kNumeric[] = {Scalar::I8,  Scalar::I16,  Scalar::I32, Scalar::I64,
                           Scalar::U8,  Scalar::U16,  Scalar::U32, Scalar::U64,
                           Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64};

/// out[i] = op(a[i], b[i], c[i]) for 64 invocations in one workgroup of 32 (two workgroups).
Case elementwise_case(const std::string &op, Scalar in, Scalar out, unsigned operands,
                      uint64_t seed) {
  std::string ti = ir::scalar_name(in), to = ir::scalar_name(out);
  std::string names = "%a";
  for (unsigned i = 1; i < operands; ++i)
    names += i == 1 ? ", %b" : ", %c";
  Case c;
  c.text = fmt::format(R"(module @m {{
  kernel @k(%x: buffer<{0}, read>, %y: buffer<{0}, read>, %z: buffer<{0}, read>, %o: buffer<{1}, readwrite>) workgroup(32, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %a = load %x, %i : {0}
    %b = load %y, %i : {0}
    %c = load %z, %i : {0}
    %r = {2} {3} : {1}
    store %o, %i, %r
    return
  }}
}}
)",
                       ti, to, op, names);
  size_t n = 64;
  auto a = interesting(in, n, seed), b = interesting(in, n, seed + 1),
       cc = interesting(in, n, seed + 2);
  std::shuffle(b.begin(), b.end(), std::mt19937_64(seed));
  std::shuffle(cc.begin(), cc.end(), std::mt19937_64(seed + 7));
  c.buffers = {bits_buffer(in, a), bits_buffer(in, b), bits_buffer(in, cc),
               bits_buffer(out, std::vector<uint64_t>(n, 0))};
  c.args.resize(4);
  c.groups = {2, 1, 1};
  return c;
}

void bind_buffers(Case &c) {
  size_t b = 0;
  for (Argument &a : c.args)
    if (!a.buffer && a.bits.empty())
      a.buffer = &c.buffers[b++];
}

class CpuBackend : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (codegen::llvm_version(&why).empty())
      GTEST_SKIP() << why;
  }
};

TEST_F(CpuBackend, reports_the_llvm_version_and_the_host_level) {
  EXPECT_EQ(codegen::llvm_version().rfind("LLVM 19", 0), 0u) << codegen::llvm_version();
  EXPECT_FALSE(codegen::host_cpu_level().empty());
  EXPECT_EQ(codegen::cpu_features("x86-64-v2").subgroup_size, 4u);
  EXPECT_EQ(codegen::cpu_features("x86-64-v3").subgroup_size, 8u);
  EXPECT_EQ(codegen::cpu_features("x86-64-v4").subgroup_size, 16u);
}

TEST_F(CpuBackend, arithmetic_and_comparisons_match_the_interpreter_for_every_type) {
  const char *binary[] = {"add", "sub", "mul", "div", "rem", "min", "max",
                          "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  uint64_t seed = 1;
  for (Scalar s : kNumeric) {
    for (const char *op : binary) {
      bool compare = std::string_view(op).size() == 2;
      Case c = elementwise_case(op, s, compare ? Scalar::Bool : s, 2, seed++);
      if (compare) { // bool has no memory layout: store it as u8
        c.text.replace(c.text.find("%r = "), std::string_view("%r = ").size(), "%rb = ");
        c.text.replace(c.text.find("store %o, %i, %r"), std::string_view("store %o, %i, %r").size(),
                       "%r = cast %rb : u8\n    store %o, %i, %r");
        c.text.replace(c.text.find("%o: buffer<bool"), std::string_view("%o: buffer<bool").size(),
                       "%o: buffer<u8");
        c.buffers[3] = bits_buffer(Scalar::U8, std::vector<uint64_t>(64, 0));
      }
      bind_buffers(c);
      expect_same_as_interpreter(c, fmt::format("{} {}", op, ir::scalar_name(s)));
    }
    Case clamp = elementwise_case("clamp", s, s, 3, seed++);
    bind_buffers(clamp);
    expect_same_as_interpreter(clamp, fmt::format("clamp {}", ir::scalar_name(s)));
  }
}

TEST_F(CpuBackend, bitwise_ops_and_shifts_match_the_interpreter) {
  uint64_t seed = 100;
  for (Scalar s : kNumeric) {
    if (ir::is_float(s))
      continue;
    for (const char *op : {"and", "or", "xor", "shl", "shr"}) {
      Case c = elementwise_case(op, s, s, 2, seed++);
      bind_buffers(c);
      expect_same_as_interpreter(c, fmt::format("{} {}", op, ir::scalar_name(s)));
    }
    for (const char *op : {"not", "neg", "abs"}) {
      if (std::string_view(op) != "not" && !ir::is_signed(s))
        continue;
      Case c = elementwise_case(op, s, s, 1, seed++);
      bind_buffers(c);
      expect_same_as_interpreter(c, fmt::format("{} {}", op, ir::scalar_name(s)));
    }
  }
}

TEST_F(CpuBackend, exact_float_ops_match_the_interpreter_bit_for_bit) {
  uint64_t seed = 200;
  for (Scalar s : {Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64}) {
    for (const char *op : {"neg", "abs", "sqrt", "rsqrt", "floor", "ceil", "round"}) {
      Case c = elementwise_case(op, s, s, 1, seed++);
      bind_buffers(c);
      expect_same_as_interpreter(c, fmt::format("{} {}", op, ir::scalar_name(s)));
    }
    Case fma = elementwise_case("fma", s, s, 3, seed++);
    bind_buffers(fma);
    expect_same_as_interpreter(fma, fmt::format("fma {}", ir::scalar_name(s)));
  }
}

TEST_F(CpuBackend, transcendentals_are_within_their_ulp_bounds) {
  uint64_t seed = 300;
  for (Scalar s : {Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64}) {
    for (const char *op : {"exp", "exp2", "log", "log2", "sin", "cos", "tanh", "erf", "pow"}) {
      bool two = std::string_view(op) == "pow";
      Case c = elementwise_case(op, s, s, two ? 2 : 1, seed++);
      // libmvec's bound is 4 ulp; f16 and bf16 round that to at most 1.
      c.tolerance = {s, ir::scalar_bits(s) == 16 ? 1u : 4u};
      bind_buffers(c);
      expect_same_as_interpreter(c, fmt::format("{} {}", op, ir::scalar_name(s)));
    }
  }
}

TEST_F(CpuBackend, casts_between_every_pair_of_types_match_the_interpreter) {
  uint64_t seed = 400;
  std::vector<Scalar> types(std::begin(kNumeric), std::end(kNumeric));
  for (Scalar from : types)
    for (Scalar to : types) {
      Case c = elementwise_case("cast", from, to, 1, seed++);
      bind_buffers(c);
      expect_same_as_interpreter(
          c, fmt::format("cast {} to {}", ir::scalar_name(from), ir::scalar_name(to)));
    }
}

TEST_F(CpuBackend, random_kernels_match_the_interpreter) {
  int count = std::getenv("CUBECC_CPU_RANDOM_KERNELS")
                  ? std::atoi(std::getenv("CUBECC_CPU_RANDOM_KERNELS"))
                  : 40;
  for (int seed = 0; seed < count; ++seed) {
    test::RandomInputs in = test::random_inputs(seed);
    Case c;
    c.text = test::random_kernel(seed);
    c.buffers = {
        in.ints, in.floats,
        HostBuffer{Scalar::U32,
                   std::vector<uint8_t>(test::kRandomWorkgroup * 3 * test::kRandomSlots * 4, 0)}};
    c.args.resize(4);
    c.args[3].bits = {static_cast<uint32_t>(in.n)};
    c.groups = {3, 1, 1};
    bind_buffers(c);
    expect_same_as_interpreter(c, fmt::format("random kernel {}", seed));
    if (HasFatalFailure() || HasFailure()) {
      ADD_FAILURE() << c.text;
      return;
    }
  }
}

} // namespace
} // namespace cubecc
