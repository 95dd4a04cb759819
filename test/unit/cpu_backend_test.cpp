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
#include "cubecc/ir/builder.h"
#include "cubecc/ir/float16.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/semantics.h"
#include "random_ir.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

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
        // NaN sign and payload are not part of the semantics (docs/cpu.md).
        if (ir::is_float(want.element) && std::isnan(ir::to_double(want.element, a)) &&
            std::isnan(ir::to_double(want.element, b)))
          continue;
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

/// Makes every NaN that a float op of `kernel` computes the canonical quiet NaN, so that a
/// kernel that hashes float bits compares equal although LLVM (constant folding, operand
/// commuting) and the host pick NaN signs and payloads differently (docs/cpu.md).
void canonicalize_nans(ir::Module &module) {
  for (const auto &kernel : module.kernels()) {
    std::vector<ir::Operation *> ops;
    kernel->walk([&](ir::Operation *op) {
      ir::Opcode o = op->opcode();
      if (op->num_results() == 1 && op->result()->type().is_scalar() &&
          ir::is_float(op->result()->type().element()) && o != ir::Opcode::Const &&
          o != ir::Opcode::Bitcast && o != ir::Opcode::Load && o != ir::Opcode::Select &&
          o != ir::Opcode::VecExtract && !op->has_flag(ir::HasRegions))
        ops.push_back(op);
    });
    ir::Builder b(module);
    for (ir::Operation *op : ops) {
      ir::Value *r = op->result();
      b.set_insertion_point_before(op->next());
      ir::Operation *ne = b.create(ir::Opcode::Ne, {r, r}, {ir::Type::scalar(ir::Scalar::Bool)});
      uint64_t quiet = r->type().element() == Scalar::F32   ? 0x7fc00000
                       : r->type().element() == Scalar::F64 ? 0x7ff8000000000000
                       : r->type().element() == Scalar::F16 ? 0x7e00
                                                            : 0x7fc0;
      ir::Operation *nan =
          b.create(ir::Opcode::Const, {}, {r->type()}, {{"value", static_cast<int64_t>(quiet)}});
      ir::Operation *sel =
          b.create(ir::Opcode::Select, {ne->result(), nan->result(), r}, {r->type()});
      r->replace_all_uses_with(sel->result());
      ne->set_operand(0, r);
      ne->set_operand(1, r);
      sel->set_operand(2, r);
    }
  }
}

struct Case {
  bool canonical_nans = false;
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
  if (c.canonical_nans)
    canonicalize_nans(*module);
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
    const double inf = INFINITY;
    for (double d : {0.0,  -0.0,    1.0,  -1.0,  0.5,          2.5,           -2.5,         3.75,
                     1e-3, 65504.0, 1e10, -1e30, inf,          -inf,          100.0,        7.0,
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
  // bool has no memory layout: a bool result is stored as u8.
  bool to_bool = out == Scalar::Bool;
  Scalar stored = to_bool ? Scalar::U8 : out;
  std::string ti(ir::scalar_name(in)), to(ir::scalar_name(out)), ts(ir::scalar_name(stored));
  std::string names = "%a";
  for (unsigned i = 1; i < operands; ++i)
    names += i == 1 ? ", %b" : ", %c";
  Case c;
  c.text =
      fmt::format(R"(module @m {{
  kernel @k(%x: buffer<{0}, read>, %y: buffer<{0}, read>, %z: buffer<{0}, read>, %o: buffer<{1}, readwrite>) workgroup(32, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %a = load %x, %i : {0}
    %b = load %y, %i : {0}
    %c = load %z, %i : {0}
    %r = {2} {3} : {5}
    {4}
    return
  }}
}}
)",
                  ti, ts, op, names,
                  to_bool ? "%s = cast %r : u8\n    store %o, %i, %s" : "store %o, %i, %r", to);
  size_t n = 64;
  auto a = interesting(in, n, seed), b = interesting(in, n, seed + 1),
       cc = interesting(in, n, seed + 2);
  std::shuffle(b.begin(), b.end(), std::mt19937_64(seed));
  std::shuffle(cc.begin(), cc.end(), std::mt19937_64(seed + 7));
  c.buffers = {bits_buffer(in, a), bits_buffer(in, b), bits_buffer(in, cc),
               bits_buffer(stored, std::vector<uint64_t>(n, 0))};
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
      if (to == from && from == Scalar::I8) { // and every type to bool
        for (Scalar f : types) {
          Case b = elementwise_case("cast", f, Scalar::Bool, 1, seed++);
          bind_buffers(b);
          expect_same_as_interpreter(b, fmt::format("cast {} to bool", ir::scalar_name(f)));
        }
      }
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
    c.canonical_nans = true;
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

/// A kernel over `n` invocations per workgroup with an i32 input `%x` (values -50..50), an f32
/// input `%f` and a u32 output `%o` of `slots` words per invocation.
Case io_case(const std::string &body, uint32_t workgroup, uint32_t groups, uint32_t slots,
             uint64_t seed, const std::string &extra_params = "") {
  Case c;
  c.text = fmt::format(R"(module @m {{
  kernel @k(%x: buffer<i32, read>, %f: buffer<f32, read>, %o: buffer<u32, readwrite>{}) workgroup({}, 1, 1) {{
    %li = local_index : u32
    %gid3 = global_id : u32x3
    %gid = vec.extract %gid3 {{lane = 0}} : u32
    %xi = load %x, %gid : i32
    %xf = load %f, %gid : f32
{}
    return
  }}
}}
)",
                       extra_params, workgroup, body);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  size_t n = size_t{workgroup} * groups;
  std::vector<int32_t> xs(n);
  std::vector<float> fs(n);
  for (size_t i = 0; i < n; ++i) {
    xs[i] = static_cast<int32_t>(rng() % 101) - 50;
    fs[i] = static_cast<float>(static_cast<int32_t>(rng() % 2001) - 1000) / 64.0f;
  }
  c.buffers = {buffer_of(Scalar::I32, xs), buffer_of(Scalar::F32, fs),
               HostBuffer{Scalar::U32, std::vector<uint8_t>(n * slots * 4, 0)}};
  c.args.resize(3);
  c.groups = {groups, 1, 1};
  return c;
}

TEST_F(CpuBackend, subgroup_ops_in_divergent_control_flow_match_the_interpreter) {
  const char *unary[] = {
      "subgroup.sum",           "subgroup.min",           "subgroup.max",
      "subgroup.inclusive_sum", "subgroup.exclusive_sum", "subgroup.inclusive_min",
      "subgroup.exclusive_min", "subgroup.inclusive_max", "subgroup.exclusive_max"};
  int seed = 0;
  for (const char *op : unary)
    for (const char *type : {"i32", "u32", "f32", "f16", "f64", "i8"}) {
      std::string body = fmt::format(R"(
    %c3 = const 3 : i32
    %m = and %xi, %c3 : i32
    %z = const 0 : i32
    %odd = ne %m, %z : bool
    %v = cast %xf : {1}
    if %odd {{
      %r = {0} %v : {1}
      %r32 = cast %r : f32
      %bits = bitcast %r32 : u32
      store %o, %gid, %bits
      yield
    }})",
                                     op, type);
      Case c = io_case(body, 24, 2, 1, seed++);
      bind_buffers(c);
      expect_same_as_interpreter(c, fmt::format("{} {}", op, type));
    }
  for (const char *op : {"subgroup.and", "subgroup.or", "subgroup.xor"}) {
    std::string body = fmt::format(R"(
    %z = const 0 : i32
    %pos = gt %xi, %z : bool
    %u = bitcast %xi : u32
    %r = {0} %u : u32
    %b = {0} %pos : bool
    %bu = cast %b : u32
    %s = add %r, %bu : u32
    if %pos {{
      %r2 = {0} %u : u32
      %t = add %s, %r2 : u32
      store %o, %gid, %t
      yield
    }} else {{
      store %o, %gid, %s
      yield
    }})",
                                   op);
    Case c = io_case(body, 20, 2, 1, seed++);
    bind_buffers(c);
    expect_same_as_interpreter(c, op);
  }
}

TEST_F(CpuBackend, shuffles_ballots_and_votes_match_the_interpreter) {
  // Sources stay inside the gang and active (the interpreter refuses the others).
  std::string body = R"(
    %u = bitcast %xi : u32
    %lane = subgroup_lane : u32
    %size = subgroup_size : u32
    %one = const 1 : u32
    %z = const 0 : u32
    %sx = subgroup.shuffle_xor %u, %one : u32
    %up = subgroup.shuffle_up %xf, %one : f32
    %down = subgroup.shuffle_down %u, %one : u32
    %last = sub %size, %one : u32
    %rev = sub %last, %lane : u32
    %sh = subgroup.shuffle %u, %rev : u32
    %bc = subgroup.broadcast %u, %z : u32
    %zi = const 0 : i32
    %neg = lt %xi, %zi : bool
    %bal = subgroup.ballot %neg : u32x4
    %b0 = vec.extract %bal {lane = 0} : u32
    %all = subgroup.all %neg : bool
    %any = subgroup.any %neg : bool
    %el = subgroup.elect : bool
    %ups = bitcast %up : u32
    %a1 = add %sx, %ups : u32
    %a2 = mul %a1, %down : u32
    %a3 = xor %a2, %sh : u32
    %a4 = add %a3, %bc : u32
    %a5 = add %a4, %b0 : u32
    %allu = cast %all : u32
    %anyu = cast %any : u32
    %elu = cast %el : u32
    %k2 = const 2 : u32
    %k4 = const 4 : u32
    %t1 = mul %anyu, %k2 : u32
    %t2 = mul %elu, %k4 : u32
    %t3 = add %allu, %t1 : u32
    %t4 = add %t3, %t2 : u32
    %base = mul %gid, %k2 : u32
    store %o, %base, %a5
    %next = add %base, %one : u32
    store %o, %next, %t4)";
  Case c = io_case(body, 64, 2, 2, 7);
  bind_buffers(c);
  expect_same_as_interpreter(c, "shuffles");
  // In divergent control flow: the active set is the lanes that took the branch.
  std::string divergent = R"(
    %z = const 0 : i32
    %pos = gt %xi, %z : bool
    if %pos {
      %neg5 = const -5 : i32
      %small = lt %xi, %neg5 : bool
      %b = subgroup.ballot %pos : u32x4
      %w = vec.extract %b {lane = 0} : u32
      %e = subgroup.elect : bool
      %eu = cast %e : u32
      %r = add %w, %eu : u32
      store %o, %gid, %r
      yield
    } else {
      %big = gt %xi, %z : bool
      %an = subgroup.any %big : bool
      %al = subgroup.all %big : bool
      %au = cast %an : u32
      %lu = cast %al : u32
      %k = const 10 : u32
      %s = mul %au, %k : u32
      %r = add %s, %lu : u32
      store %o, %gid, %r
      yield
    })";
  Case d = io_case(divergent, 40, 2, 1, 8);
  bind_buffers(d);
  expect_same_as_interpreter(d, "divergent votes");
}

TEST_F(CpuBackend, barriers_in_loops_and_ifs_with_shared_memory_match_the_interpreter) {
  // A tree reduction in shared memory: a barrier inside a loop and inside an if, with values
  // carried across barriers (per invocation) and a uniform while loop around a barrier.
  std::string body = R"(
    %tile = shared.alloc : shared<f32, 64>
    store %tile, %li, %xf
    barrier
    %z = const 0 : u32
    %one = const 1 : u32
    %half0 = const 32 : u32
    %acc0 = const 0.0 : f32
    %own = load %tile, %li : f32
    %total = for %z, %one, %one, %acc0 : f32 (%it: u32, %acc: f32) {
      %h = while %half0 : u32 (%hh: u32) {
        %more = gt %hh, %z : bool
        condition %more, %hh
      } do (%h2: u32) {
        %active = lt %li, %h2 : bool
        if %active {
          %j = add %li, %h2 : u32
          %a = load %tile, %li : f32
          %b = load %tile, %j : f32
          %s = add %a, %b : f32
          store %tile, %li, %s
          yield
        }
        barrier
        %next = shr %h2, %one : u32
        yield %next
      }
      %sum = load %tile, %z : f32
      %acc2 = add %acc, %sum : f32
      yield %acc2
    }
    %nonzero = ne %total, %acc0 : bool
    %r = if %nonzero : f32 {
      barrier
      %again = load %tile, %z : f32
      %t = mul %again, %total : f32
      yield %t
    } else {
      barrier
      yield %acc0
    }
    %bits = bitcast %r : u32
    %ob = bitcast %own : u32
    %sum2 = add %bits, %ob : u32
    store %o, %gid, %sum2)";
  Case c = io_case(body, 64, 3, 1, 9);
  bind_buffers(c);
  expect_same_as_interpreter(c, "tree reduction");
}

TEST_F(CpuBackend, barriers_in_loops_with_break_and_continue_match_the_interpreter) {
  std::string body = R"(
    %sh = shared.alloc : shared<i32, 48>
    %z = const 0 : u32
    %one = const 1 : u32
    %ten = const 10 : u32
    %three = const 3 : u32
    %init = const 0 : i32
    %res = for %z, %ten, %one, %init : i32 (%k: u32, %acc: i32) {
      %ki = cast %k : i32
      %v = add %xi, %ki : i32
      store %sh, %li, %v
      barrier
      %nb = add %li, %one : u32
      %c48 = const 48 : u32
      %nbm = rem %nb, %c48 : u32
      %w = load %sh, %nbm : i32
      barrier
      %acc2 = add %acc, %w : i32
      %is3 = eq %k, %three : bool
      if %is3 {
        continue %acc2
      }
      %c7 = const 7 : u32
      %is7 = eq %k, %c7 : bool
      if %is7 {
        break %acc2
      }
      %acc3 = mul %acc2, %v : i32
      yield %acc3
    }
    %u = bitcast %res : u32
    store %o, %gid, %u)";
  Case c = io_case(body, 48, 2, 1, 10);
  bind_buffers(c);
  expect_same_as_interpreter(c, "barrier loop with exits");
}

TEST_F(CpuBackend, divergent_loops_with_break_and_continue_match_the_interpreter) {
  std::string body = R"(
    %z = const 0 : i32
    %one = const 1 : i32
    %n = abs %xi : i32
    %r = for %z, %n, %one, %z : i32 (%i: i32, %acc: i32) {
      %c5 = const 5 : i32
      %m = rem %i, %c5 : i32
      %skip = eq %m, %one : bool
      if %skip {
        continue %acc
      }
      %acc2 = add %acc, %i : i32
      %c40 = const 40 : i32
      %big = gt %acc2, %c40 : bool
      if %big {
        %neg = neg %acc2 : i32
        break %neg
      }
      yield %acc2
    }
    %w = while %r : i32 (%a: i32) {
      %c100 = const 100 : i32
      %small = lt %a, %c100 : bool
      condition %small, %a
    } do (%b: i32) {
      %c3 = const 3 : i32
      %b2 = add %b, %c3 : i32
      %odd = and %b2, %one : i32
      %isodd = eq %odd, %one : bool
      if %isodd {
        %b3 = add %b2, %one : i32
        continue %b3
      }
      yield %b2
    }
    %u = bitcast %w : u32
    store %o, %gid, %u)";
  Case c = io_case(body, 37, 2, 1, 11);
  bind_buffers(c);
  expect_same_as_interpreter(c, "divergent loops");
}

TEST_F(CpuBackend, atomics_local_arrays_and_vector_types_match_the_interpreter) {
  std::string body = R"(
    %z = const 0 : u32
    %one = const 1 : u32
    %four = const 4 : u32
    %u = bitcast %xi : u32
    %o0 = atomic.add %o, %z, %u : u32
    %o1 = atomic.max %o, %one, %u : u32
    %k2 = const 2 : u32
    %o2 = atomic.xor %o, %k2, %u : u32
    %k3 = const 3 : u32
    %o3 = atomic.cmpxchg %o, %k3, %z, %li : u32
    %loc = local.alloc : local<u32, 8>
    %c8 = const 8 : u32
    for %z, %c8, %one (%i: u32) {
      %v = mul %i, %u : u32
      store %loc, %i, %v
      yield
    }
    %seven = const 7 : u32
    %j = and %u, %seven : u32
    %lv = load %loc, %j : u32
    %vec = vec.build %o0, %o1, %o2, %lv : u32x4
    %base = mul %gid, %four : u32
    %slot = add %base, %four : u32
    %dbl = add %vec, %vec : u32x4
    store %o, %slot, %dbl
    %back = load %o, %slot : u32x4
    %e3 = vec.extract %back {lane = 3} : u32
    %s = add %e3, %o3 : u32
    %slot2 = add %slot, %k3 : u32
    store %o, %slot2, %s)";
  Case c = io_case(body, 32, 2, 5, 12);
  bind_buffers(c);
  expect_same_as_interpreter(c, "atomics, local arrays, vectors");
  std::string floats = R"(
    %z = const 0 : u32
    %h = cast %xf : f16
    %d = cast %xf : f64
    %loc = local.alloc : local<f64, 4>
    store %loc, %z, %d
    %dd = load %loc, %z : f64
    %back = cast %dd : f32
    %s = atomic.add %o, %z, %li : u32
    %hf = cast %h : f32
    %sum = add %hf, %back : f32
    %bits = bitcast %sum : u32
    %one = const 1 : u32
    %i = add %gid, %one : u32
    store %o, %i, %bits)";
  Case f = io_case(floats, 32, 1, 2, 13);
  bind_buffers(f);
  expect_same_as_interpreter(f, "float atomics");
}

TEST_F(CpuBackend, example_kernels_match_the_interpreter) {
  {
    Case c;
    c.text = test::read_file(CUBECC_SOURCE_DIR "/examples/ir/axpy.cir");
    std::vector<float> x(1000), y(1000);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(i) * 0.25f, y[i] = 3.0f - static_cast<float>(i);
    c.buffers = {buffer_of(Scalar::F32, x), buffer_of(Scalar::F32, y)};
    c.args.resize(3);
    c.args[2].bits = {std::bit_cast<uint32_t>(1.5f)};
    c.groups = {4, 1, 1};
    bind_buffers(c);
    expect_same_as_interpreter(c, "axpy");
  }
  {
    Case c;
    c.text = test::read_file(CUBECC_SOURCE_DIR "/examples/ir/reduce_sum.cir");
    std::vector<float> in(700);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(i % 17) - 4.0f;
    c.buffers = {buffer_of(Scalar::F32, in), buffer_of(Scalar::F32, std::vector<float>(1, 0.0f))};
    c.args.resize(2);
    c.groups = {3, 1, 1};
    bind_buffers(c);
    expect_same_as_interpreter(c, "reduce_sum");
  }
}

TEST_F(CpuBackend, checked_mode_records_the_first_fault_and_drops_the_access) {
  const char *text = R"(module @m {
  kernel @k(%in: buffer<f32, read>, %out: buffer<f32, readwrite>) workgroup(16, 1, 1) {
    %gid3 = global_id : u32x3
    %i = vec.extract %gid3 {lane = 0} : u32
    %k5 = const 5 : u32
    %j = add %i, %k5 : u32
    %v = load %in, %j : f32 loc("k.cpp":12:7)
    store %out, %i, %v loc("k.cpp":13:3)
    return
  }
}
)";
  auto module = test::parse_valid(text);
  ASSERT_TRUE(module);
  for (const std::string &level : runnable_levels()) {
    SCOPED_TRACE(level);
    std::vector<ir::Diagnostic> errors;
    auto binary = codegen::compile_cpu(*module->kernels().front(), {level, true}, errors);
    ASSERT_TRUE(binary) << ir::to_string(errors);
    Loaded loaded;
    std::string why;
    ASSERT_TRUE(load(binary->object, loaded, why)) << why;
    std::vector<float> in(20, 2.0f);
    HostBuffer a = buffer_of(Scalar::F32, in),
               b = buffer_of(Scalar::F32, std::vector<float>(16, 9.0f));
    std::vector<Argument> args(2);
    args[0].buffer = &a;
    args[1].buffer = &b;
    cubecc_cpu_fault fault{};
    run_cpu(*binary, loaded, args, {1, 1, 1}, &fault);
    EXPECT_EQ(fault.kind, 1u);
    EXPECT_EQ(fault.param, 0u);
    EXPECT_EQ(fault.index, 20u);
    EXPECT_EQ(fault.count, 20u);
    EXPECT_EQ(fault.line, 12u);
    EXPECT_EQ(fault.column, 7u);
    std::vector<float> out(16);
    std::memcpy(out.data(), b.bytes.data(), 64);
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(out[i], i + 5 < 20 ? 2.0f : 0.0f) << i;
  }
}

TEST_F(CpuBackend, emits_llvm_ir_and_assembly_and_reports_bad_levels) {
  auto module = test::parse_valid(test::read_file(CUBECC_SOURCE_DIR "/examples/ir/axpy.cir"));
  ASSERT_TRUE(module);
  const ir::Kernel &kernel = *module->kernels().front();
  std::vector<ir::Diagnostic> errors;
  auto ir_text =
      codegen::emit_cpu_text(kernel, {"x86-64-v3", false}, codegen::CpuText::LlvmIr, errors);
  ASSERT_TRUE(ir_text) << ir::to_string(errors);
  EXPECT_NE(ir_text->find("define void @cubecc_cpu_kernel"), std::string::npos);
  EXPECT_NE(ir_text->find("<8 x float>"), std::string::npos);
  auto assembly =
      codegen::emit_cpu_text(kernel, {"x86-64-v4", false}, codegen::CpuText::Assembly, errors);
  ASSERT_TRUE(assembly) << ir::to_string(errors);
  EXPECT_NE(assembly->find("zmm"), std::string::npos);
  EXPECT_FALSE(codegen::compile_cpu(kernel, {"x86-64-v9", false}, errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.back().message.find("unknown CPU level"), std::string::npos);
}

TEST_F(CpuBackend, compiles_on_several_threads_at_once) {
  auto module = test::parse_valid(test::read_file(CUBECC_SOURCE_DIR "/examples/ir/reduce_sum.cir"));
  ASSERT_TRUE(module);
  const ir::Kernel &kernel = *module->kernels().front();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<ir::Diagnostic> errors;
      auto b = codegen::compile_cpu(kernel, {codegen::cpu_levels()[t % 3], false}, errors);
      if (b && !b->object.empty())
        ++ok;
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(ok.load(), 4);
}

TEST_F(CpuBackend, vector_loads_and_stores_of_consecutive_lanes_match_the_interpreter) {
  for (const char *type : {"f32x4", "u16x8", "f64x2", "i8x16", "f32x3"}) {
    std::string t = type;
    std::string scalar = t.substr(0, t.find('x'));
    unsigned lanes = static_cast<unsigned>(std::stoi(t.substr(t.find('x') + 1)));
    std::string body = fmt::format(R"(
    %k = const {1} : u32
    %base = mul %gid, %k : u32
    %v = load %in, %base : {0}
    %w = add %v, %v : {0}
    %z = const 0 : i32
    %odd = lt %xi, %z : bool
    if %odd {{
      store %out, %base, %w
      yield
    }} else {{
      %l = subgroup_lane : u32
      %lb = mul %l, %k : u32
      %u = load %in, %lb : {0}
      store %out, %base, %u
      yield
    }})",
                                   type, lanes);
    Case c = io_case(body, 40, 2, 1, 21,
                     fmt::format(", %in: buffer<{0}, read>, %out: buffer<{0}, readwrite>", scalar));
    Scalar s = *ir::parse_scalar(scalar);
    size_t n = 80 * lanes;
    c.buffers.push_back(bits_buffer(s, interesting(s, n, 5)));
    c.buffers.push_back(bits_buffer(s, std::vector<uint64_t>(n, 0)));
    c.args.resize(5);
    bind_buffers(c);
    expect_same_as_interpreter(c, type);
  }
}

TEST_F(CpuBackend, large_local_arrays_across_barriers_match_the_interpreter) {
  // 64 invocations x 2048 f32: too big for the stack, so from the heap; kept across a barrier.
  std::string body = R"(
    %loc = local.alloc : local<f32, 2048>
    %sh = shared.alloc : shared<f32, 64>
    %z = const 0 : u32
    %one = const 1 : u32
    %n = const 2048 : u32
    for %z, %n, %one (%i: u32) {
      %fi = cast %i : f32
      %v = mul %fi, %xf : f32
      store %loc, %i, %v
      yield
    }
    store %sh, %li, %xf
    barrier
    %c63 = const 63 : u32
    %j = sub %c63, %li : u32
    %other = load %sh, %j : f32
    %k = const 2047 : u32
    %mine = load %loc, %k : f32
    %s = add %mine, %other : f32
    %bits = bitcast %s : u32
    store %o, %gid, %bits)";
  Case c = io_case(body, 64, 2, 1, 31);
  bind_buffers(c);
  expect_same_as_interpreter(c, "large local array");
}

TEST_F(CpuBackend, builtins_of_every_workgroup_shape_match_the_interpreter) {
  for (auto [x, y, z] : {std::array<uint32_t, 3>{8, 4, 2},
                         {5, 3, 1},
                         {16, 2, 1},
                         {3, 1, 7},
                         {1, 1, 1},
                         {33, 1, 1}}) {
    SCOPED_TRACE(fmt::format("workgroup ({}, {}, {})", x, y, z));
    Case c;
    c.text = fmt::format(R"(module @m {{
  kernel @k(%o: buffer<u32, readwrite>) workgroup({}, {}, {}) {{
    %g = global_id : u32x3
    %l = local_id : u32x3
    %w = workgroup_id : u32x3
    %n = num_workgroups : u32x3
    %s = workgroup_size : u32x3
    %li = local_index : u32
    %sg = subgroup_id : u32
    %sl = subgroup_lane : u32
    %ns = num_subgroups : u32
    %ss = subgroup_size : u32
    %gx = vec.extract %g {{lane = 0}} : u32
    %gy = vec.extract %g {{lane = 1}} : u32
    %gz = vec.extract %g {{lane = 2}} : u32
    %nx = vec.extract %n {{lane = 0}} : u32
    %ny = vec.extract %n {{lane = 1}} : u32
    %sx = vec.extract %s {{lane = 0}} : u32
    %sy = vec.extract %s {{lane = 1}} : u32
    %wx = mul %nx, %sx : u32
    %wy = mul %ny, %sy : u32
    %row = mul %gz, %wy : u32
    %row2 = add %row, %gy : u32
    %lin = mul %row2, %wx : u32
    %id = add %lin, %gx : u32
    %k8 = const 8 : u32
    %base = mul %id, %k8 : u32
    %lx = vec.extract %l {{lane = 0}} : u32
    %ly = vec.extract %l {{lane = 1}} : u32
    %lz = vec.extract %l {{lane = 2}} : u32
    %wz = vec.extract %w {{lane = 2}} : u32
    %vals = vec.build %lx, %ly, %lz, %wz, %li, %sg, %sl, %ns : u32x8
    store %o, %base, %vals
    return
  }}
}}
)",
                         x, y, z);
    uint32_t invocations = x * y * z * 2 * 2 * 1;
    c.buffers = {HostBuffer{Scalar::U32, std::vector<uint8_t>(invocations * 8 * 4, 0)}};
    c.args.resize(1);
    c.groups = {2, 2, 1};
    bind_buffers(c);
    expect_same_as_interpreter(c, "builtins");
  }
}

TEST_F(CpuBackend, value_parameters_of_every_type_arrive_as_the_interpreter_reads_them) {
  Case c;
  c.text = R"(module @m {
  kernel @k(%o: buffer<u64, readwrite>, %a: i8, %b: u16, %c: f16, %d: bool, %e: f64, %f: u64, %g: f32x2, %h: bf16, %i: i64) workgroup(4, 1, 1) {
    %li = local_index : u32
    %k9 = const 9 : u32
    %base = mul %li, %k9 : u32
    %a64 = cast %a : u64
    store %o, %base, %a64
    %one = const 1 : u32
    %p1 = add %base, %one : u32
    %b64 = cast %b : u64
    store %o, %p1, %b64
    %p2 = add %p1, %one : u32
    %cb = bitcast %c : u16
    %c64 = cast %cb : u64
    store %o, %p2, %c64
    %p3 = add %p2, %one : u32
    %d64 = cast %d : u64
    store %o, %p3, %d64
    %p4 = add %p3, %one : u32
    %e64 = bitcast %e : u64
    store %o, %p4, %e64
    %p5 = add %p4, %one : u32
    store %o, %p5, %f
    %p6 = add %p5, %one : u32
    %g64 = bitcast %g : u64
    store %o, %p6, %g64
    %p7 = add %p6, %one : u32
    %hb = bitcast %h : u16
    %h64 = cast %hb : u64
    store %o, %p7, %h64
    %p8 = add %p7, %one : u32
    %i64 = bitcast %i : u64
    store %o, %p8, %i64
    return
  }
}
)";
  c.buffers = {HostBuffer{Scalar::U64, std::vector<uint8_t>(4 * 9 * 8, 0)}};
  c.args.resize(10);
  c.args[1].bits = {0xfe};
  c.args[2].bits = {0xbeef};
  c.args[3].bits = {0x3c01};
  c.args[4].bits = {1};
  c.args[5].bits = {std::bit_cast<uint64_t>(-2.75)};
  c.args[6].bits = {0x123456789abcdef0};
  c.args[7].bits = {std::bit_cast<uint32_t>(1.5f), std::bit_cast<uint32_t>(-0.0f)};
  c.args[8].bits = {0x4049};
  c.args[9].bits = {0xfffffffffffffff9};
  bind_buffers(c);
  expect_same_as_interpreter(c, "parameters");
}

} // namespace
} // namespace cubecc
