//===- vulkan_vs_glsl.cpp - cubecc's SPIR-V against the same algorithms written in GLSL
//--------===//
//
// For axpy, reduction, prefix sum, softmax, transpose and matmul: the example kernel (traced, -O2,
// written by cubecc's SPIR-V writer) and its GLSL twin (bench/glsl/*.comp, compiled by
// glslangValidator) run on the same Vulkan device, buffers and grid. Both outputs are compared
// first (the twins must compute the same thing); then the two are launched alternately, each launch
// timed by device timestamps. Each round launches both, the first of the pair alternating between
// rounds (so that neither twin always runs on the caches the other left), and the ratio is the
// median of the rounds' ratios cubecc / GLSL (below 1: cubecc is faster): a paired measure, which
// drift in the machine's load hits on both sides alike. The columns in microseconds are the
// medians of each twin's launches. Mesa's shader cache is turned off for the run. Prints a table,
// then one JSON object per kernel (with `bits_differ`: how many output elements of the twins differ
// in any bit). matmul has two rows: against matmul.comp (GLSL's fma(), which may round twice) and
// against matmul_exact_fma.comp (the single rounding the IR's fma promises, computed as cubecc's
// writer computes it where the device's fma is not fused; the outputs must agree bit for bit).
//
// Usage: vulkan_vs_glsl [--rounds N] [--kernel NAME] [--dump DIR] [--cpu-time] [--control]
//                       [--ours FILE]
// --control runs the GLSL twin in cubecc's place: the ratios it prints (ideally 1.00) are the
// method's noise floor on this machine, to read the real run's ratios against.
// --cpu-time times each launch by the CPU time the process spent on it instead of device
// timestamps: on lavapipe (a CPU driver) that is the work the shader did, and unlike wall-clock
// time it barely moves when other processes share the machine's cores.
// --dump writes both modules of each kernel to DIR/<kernel>.cubecc.spv and <kernel>.glsl.spv
// (for spirv-dis, to compare them instruction by instruction).
// --ours FILE runs the SPIR-V module in FILE (say, a hand-edited --dump, reassembled with spirv-as)
// in place of cubecc's, to try a change to the writer's output before writing it in the writer.
// Environment: CUBECC_GLSLANG (the glslangValidator to use), CUBECC_BENCH_GLSL_DIR (bench/glsl).
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/vulkan_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <time.h>
#include <unistd.h>

using namespace cubecc;

namespace {

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "vulkan_vs_glsl: %s\n", message.c_str());
  std::exit(1);
}

std::unique_ptr<ir::Module> trace_example(const std::string &name) {
  for (const auto &k : dsl::registered_kernels())
    if (k.name == name) {
      auto module = std::make_unique<ir::Module>();
      std::vector<ir::Diagnostic> errors;
      k.trace(*module, k, errors);
      if (errors.empty())
        errors = passes::optimize(*module, 2);
      if (!errors.empty())
        die(ir::to_string(errors));
      return module;
    }
  die("no example kernel named " + name);
}

std::vector<uint32_t> read_words(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    die("cannot read " + path);
  if (bytes.empty() || bytes.size() % 4 != 0)
    die(path + " is not a SPIR-V binary (its size is not a positive multiple of 4 bytes)");
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

std::vector<uint32_t> compile_glsl(const std::string &file) {
  std::string out = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                    "/cubecc-bench-" + std::to_string(getpid()) + ".spv";
  // $CUBECC_GLSLANG, else the glslangValidator found at build time, else the one on PATH.
  const char *glslang = std::getenv("CUBECC_GLSLANG");
  if (!glslang || !*glslang)
    glslang = access(CUBECC_GLSLANG, X_OK) == 0 ? CUBECC_GLSLANG : "glslangValidator";
  std::string command =
      fmt::format("{} -V --target-env vulkan1.2 -S comp {} -o {} > /dev/null", glslang, file, out);
  if (std::system(command.c_str()) != 0)
    die("glslangValidator failed on " + file);
  std::vector<uint32_t> words = read_words(out);
  std::remove(out.c_str());
  return words;
}

void write_words(const std::string &path, const std::vector<uint32_t> &words) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(words.data()),
            static_cast<std::streamsize>(words.size() * 4));
  if (!out)
    die("cannot write " + path);
}

/// The CPU time of every thread of the process so far, in nanoseconds.
double process_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

/// One benchmark: the buffers (as floats), the value arguments and the grid.
struct Case {
  std::string name; ///< the example kernel
  std::string glsl; ///< its twin under bench/glsl
  std::string what; ///< the problem size, for the table
  std::vector<std::vector<float>> buffers;
  std::vector<std::vector<uint64_t>> values; ///< per parameter (empty for buffers)
  std::array<uint32_t, 3> grid;
  size_t output; ///< the buffer compared between the twins
  double tolerance;
  std::string label = {}; ///< the table's name for the row, when not `name`
};

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

uint64_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// The parameter list of a kernel taking tensors (buffer, shapes, strides) and scalars.
struct Params {
  std::vector<std::vector<uint64_t>> values;
  void tensor(std::vector<uint32_t> shape, std::vector<uint32_t> strides) {
    values.push_back({});
    for (uint32_t s : shape)
      values.push_back({s});
    for (uint32_t s : strides)
      values.push_back({s});
  }
  void scalar(float f) { values.push_back({bits(f)}); }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  {
    const uint32_t n = 1u << 20;
    Params p;
    p.tensor({n}, {1});
    p.tensor({n}, {1});
    p.scalar(1.5f);
    out.push_back({"axpy",
                   "axpy.comp",
                   "n = 2^20",
                   {random_floats(n, 1), random_floats(n, 2)},
                   p.values,
                   {n / 256, 1, 1},
                   1,
                   1e-6});
  }
  {
    const uint32_t n = 1u << 22, groups = 128;
    Params p;
    p.tensor({n}, {1});
    p.tensor({groups}, {1});
    out.push_back({"reduce_sum",
                   "reduce_sum.comp",
                   "n = 2^22, 128 workgroups",
                   {random_floats(n, 3), std::vector<float>(groups)},
                   p.values,
                   {groups, 1, 1},
                   1,
                   1e-4});
  }
  {
    const uint32_t n = 1u << 22, groups = n / 256;
    Params p;
    p.tensor({n}, {1});
    p.tensor({n}, {1});
    p.tensor({groups}, {1});
    out.push_back({"prefix_sum_f32",
                   "prefix_sum.comp",
                   "n = 2^22, blocks of 256",
                   {random_floats(n, 8), std::vector<float>(n), std::vector<float>(groups)},
                   p.values,
                   {groups, 1, 1},
                   1,
                   1e-5});
  }
  {
    const uint32_t rows = 512, cols = 1024;
    Params p;
    p.tensor({rows, cols}, {cols, 1});
    p.tensor({rows, cols}, {cols, 1});
    out.push_back({"softmax",
                   "softmax.comp",
                   "512 x 1024",
                   {random_floats(rows * cols, 4, -8, 8), std::vector<float>(rows * cols)},
                   p.values,
                   {rows, 1, 1},
                   1,
                   1e-5});
  }
  {
    const uint32_t rows = 2048, cols = 2048;
    Params p;
    p.tensor({rows, cols}, {cols, 1});
    p.tensor({cols, rows}, {rows, 1});
    out.push_back({"transpose_32x8",
                   "transpose.comp",
                   "2048 x 2048",
                   {random_floats(rows * cols, 5), std::vector<float>(rows * cols)},
                   p.values,
                   {cols / 32, rows / 32, 1},
                   1,
                   0});
  }
  {
    const uint32_t m = 384, k = 384, n = 384;
    Params p;
    p.tensor({m, k}, {k, 1});
    p.tensor({k, n}, {n, 1});
    p.tensor({m, n}, {n, 1});
    out.push_back({"matmul_16x16x16",
                   "matmul.comp",
                   "384 x 384 x 384",
                   {random_floats(m * k, 6), random_floats(k * n, 7), std::vector<float>(m * n)},
                   p.values,
                   {n / 16, m / 16, 1},
                   2,
                   1e-4});
    // GLSL's fma() may round twice (lavapipe's does) where the IR's rounds once: this twin
    // computes fma as cubecc's writer must on such a device, so the two agree bit for bit.
    out.push_back({"matmul_16x16x16",
                   "matmul_exact_fma.comp",
                   "384^3, exact fma twin",
                   {random_floats(m * k, 6), random_floats(k * n, 7), std::vector<float>(m * n)},
                   p.values,
                   {n / 16, m / 16, 1},
                   2,
                   0,
                   "matmul (exact)"});
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  int rounds = 15;
  std::string only, dump_dir, ours_file;
  bool cpu_time = false, control = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--kernel" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--dump" && i + 1 < argc)
      dump_dir = argv[++i];
    else if (a == "--cpu-time")
      cpu_time = true;
    else if (a == "--control")
      control = true;
    else if (a == "--ours" && i + 1 < argc)
      ours_file = argv[++i];
    else
      die("usage: vulkan_vs_glsl [--rounds N] [--kernel NAME] [--dump DIR] [--cpu-time] "
          "[--control] [--ours FILE]");
  }
  if (!ours_file.empty() && only.empty())
    die("--ours needs --kernel: the module in the file replaces one kernel's");
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1); // compile every pipeline, as a cold start would

  std::unique_ptr<runtime::VulkanDevice> device;
  try {
    device = runtime::VulkanDevice::open();
  } catch (const std::exception &e) {
    die(e.what());
  }
  std::unique_ptr<runtime::DeviceStream> stream = device->create_stream();
  std::string in_our_place = control             ? "; CONTROL RUN: the GLSL twin in cubecc's place"
                             : ours_file.empty() ? ""
                                                 : "; " + ours_file + " in cubecc's place";
  std::printf("device: %s; %d timed rounds per kernel, alternating; %s%s\n\n",
              device->info().name.c_str(), rounds,
              cpu_time ? "process CPU time per launch" : "device timestamps", in_our_place.c_str());
  std::printf("%-16s %-26s %12s %12s %8s\n", "kernel", "size", "cubecc (us)", "GLSL (us)", "ratio");
  std::vector<std::string> json;
  for (Case &c : cases()) {
    if (!only.empty() && c.name != only)
      continue;
    auto module = trace_example(c.name);
    const ir::Kernel &kernel = *module->kernels()[0];
    std::unique_ptr<runtime::CompiledKernel> ours, theirs;
    try {
      const char *dir = std::getenv("CUBECC_BENCH_GLSL_DIR");
      codegen::SpirvKernel twin{
          compile_glsl(std::string(dir && *dir ? dir : CUBECC_BENCH_GLSL_DIR) + "/" + c.glsl),
          codegen::KernelAbi::of(kernel)};
      if (control)
        ours = device->compile_spirv(twin);
      else if (!ours_file.empty())
        ours = device->compile_spirv({read_words(ours_file), codegen::KernelAbi::of(kernel)});
      else
        ours = device->compile(kernel);
      theirs = device->compile_spirv(twin);
      if (!dump_dir.empty()) {
        std::vector<ir::Diagnostic> errors;
        auto mine = codegen::emit_spirv(kernel, device->info().features, errors);
        if (!mine)
          die(c.name + ": " + ir::to_string(errors));
        write_words(dump_dir + "/" + c.name + ".cubecc.spv", mine->words);
        write_words(dump_dir + "/" + c.name + ".glsl.spv", twin.words);
      }
    } catch (const std::exception &e) {
      die(c.name + ": " + e.what());
    }

    std::vector<runtime::DeviceMemory> memories;
    auto reset_buffers = [&] {
      for (size_t b = 0; b < c.buffers.size(); ++b)
        stream->upload(memories[b], 0, c.buffers[b].data(), c.buffers[b].size() * 4);
    };
    for (const auto &b : c.buffers)
      memories.push_back(device->allocate(b.size() * 4));
    std::vector<runtime::LaunchArg> args;
    size_t next_buffer = 0;
    for (const auto &v : c.values) {
      runtime::LaunchArg arg;
      if (v.empty()) {
        arg.memory = &memories[next_buffer];
        arg.bytes = c.buffers[next_buffer].size() * 4;
        ++next_buffer;
      } else {
        arg.bits = v;
      }
      args.push_back(arg);
    }
    auto run = [&](const runtime::CompiledKernel &k) {
      double before = process_cpu_ns();
      stream->launch(k, c.grid, args);
      stream->synchronize();
      return cpu_time ? process_cpu_ns() - before
                      : static_cast<double>(stream->last_launch_times_ns().at(0));
    };

    // The twins compute the same result (within rounding: contraction and exp differ).
    std::vector<float> ours_out(c.buffers[c.output].size()), theirs_out(ours_out.size());
    reset_buffers();
    run(*ours);
    stream->download(memories[c.output], 0, ours_out.data(), ours_out.size() * 4);
    reset_buffers();
    run(*theirs);
    stream->download(memories[c.output], 0, theirs_out.data(), theirs_out.size() * 4);
    size_t differing = 0; // elements whose bits differ
    for (size_t i = 0; i < ours_out.size(); ++i) {
      double a = ours_out[i], b = theirs_out[i];
      differing += bits(ours_out[i]) != bits(theirs_out[i]);
      if (!(std::abs(a - b) <= c.tolerance * std::max(1.0, std::abs(b))))
        die(fmt::format("{}: the GLSL twin disagrees at element {}: cubecc {} GLSL {}", c.name, i,
                        a, b));
    }

    for (int w = 0; w < 2; ++w) { // warm-up
      run(*ours);
      run(*theirs);
    }
    std::vector<double> ours_ns, theirs_ns, ratios;
    for (int r = 0; r < rounds; ++r) {
      double mine, twin;
      if (r % 2 == 0) {
        mine = run(*ours);
        twin = run(*theirs);
      } else {
        twin = run(*theirs);
        mine = run(*ours);
      }
      ours_ns.push_back(mine);
      theirs_ns.push_back(twin);
      ratios.push_back(mine / twin);
    }
    double a = bench::median(ours_ns) / 1000, b = bench::median(theirs_ns) / 1000;
    double ratio = bench::median(ratios);
    const std::string &row = c.label.empty() ? c.name : c.label;
    std::printf("%-16s %-26s %12.1f %12.1f %8.2f\n", row.c_str(), c.what.c_str(), a, b, ratio);
    json.push_back(fmt::format(
        R"({{"kernel": "{}", "size": "{}", "cubecc_us": {:.1f}, "glsl_us": {:.1f}, "ratio": {:.3f}, )"
        R"("elements": {}, "bits_differ": {}, "control": {}}})",
        row, c.what, a, b, ratio, ours_out.size(), differing, control));
    for (auto &m : memories)
      device->free(m);
  }
  std::printf("\n");
  for (const std::string &line : json)
    std::printf("%s\n", line.c_str());
  return 0;
}
