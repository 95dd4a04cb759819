//===- device_launcher.cpp --------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/codegen/cpu.h"
#include "cubecc/ir/clone.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/runtime/environment_source.h"
#include "cubecc/runtime/files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

namespace cubecc::test {

runtime::Device &shared_device(const std::string &name) {
  static std::map<std::string, std::unique_ptr<runtime::Device>> devices;
  static std::map<std::string, std::string> failures; // a device that did not open is not retried
  if (auto failed = failures.find(name); failed != failures.end())
    throw runtime::Error(runtime::ErrorKind::NoDevice, failed->second);
  auto &slot = devices[name];
  if (!slot) {
    try {
      slot = runtime::open_device(name);
    } catch (const runtime::Error &e) {
      failures[name] = e.what();
      throw;
    }
  }
  return *slot;
}

namespace {

/// Why the cpu device cannot compile here (the LLVM backend is not built or not loadable), or "".
std::string why_cpu_cannot_compile() {
  std::string why;
  if (codegen::llvm_version(&why).empty())
    return "cpu: the LLVM backend is not available: " + why;
  return "";
}

} // namespace

std::string why_device_absent(const std::string &name) {
  try {
    shared_device(name);
  } catch (const runtime::Error &e) {
    return e.what();
  }
  return name == "cpu" ? why_cpu_cannot_compile() : "";
}

bool device_is_optional(const std::string &name) {
  return name == "cuda" || name == "hip" || (name == "cpu" && !why_cpu_cannot_compile().empty());
}

namespace {

/// The compile options the e2e suite's kernels are keyed under: they are run as given (each test
/// optimizes them itself, or not).
constexpr std::string_view kAsGiven = "-O0";

/// CUBECC_ENV: the environment bundle to load kernels from before compiling them. Every kernel
/// the devices accept must then come from it: the count of JIT compilations that succeeded is
/// checked to be zero when the suite ends (kernels a device refuses are still compiled, to check
/// the refusal).
struct EnvironmentRun {
  std::shared_ptr<const runtime::EnvironmentSource> environment;
  runtime::EnvironmentStatistics statistics;
  uint64_t jit_compiles = 0;
  std::string collect_dir; ///< CUBECC_E2E_COLLECT: every kernel compiled is written here

  static EnvironmentRun &get() {
    static EnvironmentRun run = [] {
      EnvironmentRun r;
      if (const char *path = std::getenv("CUBECC_ENV"); path && *path)
        r.environment = runtime::open_environment(path);
      if (const char *dir = std::getenv("CUBECC_E2E_COLLECT"); dir && *dir)
        r.collect_dir = dir;
      return r;
    }();
    return run;
  }
};

class EnvironmentCheck : public testing::Environment {
public:
  void TearDown() override {
    EnvironmentRun &run = EnvironmentRun::get();
    if (!run.environment)
      return;
    std::cout << "[          ] environment " << run.environment->name() << ": "
              << run.statistics.hits << " hits, " << run.statistics.misses << " misses, "
              << run.statistics.rejected << " rejected; " << run.jit_compiles
              << " JIT compilations\n";
    EXPECT_GT(run.statistics.hits, 0u);
    EXPECT_EQ(run.statistics.rejected, 0u);
    EXPECT_EQ(run.jit_compiles, 0u) << "kernels were compiled that the environment should hold";
  }
};
const auto *const environment_check = testing::AddGlobalTestEnvironment(new EnvironmentCheck);

/// Writes `kernel` to <dir>/<backend>/<hash>.cir, for `cubecc env build` (atomically: tests in
/// other processes may write the same kernel at the same time).
void collect(const std::string &dir, const std::string &backend, const ir::Kernel &kernel,
             const std::string &hash) {
  std::filesystem::path path = std::filesystem::path(dir) / backend;
  std::filesystem::create_directories(path);
  runtime::write_file_atomically((path / (hash + ".cir")).string(),
                                 ir::to_string(*ir::copy_kernel(kernel)));
}

/// The kernel from the environment, or compiled.
std::unique_ptr<runtime::CompiledKernel> compile(runtime::Device &device, const ir::Kernel &kernel,
                                                 const ir::Hash128 &hash) {
  EnvironmentRun &run = EnvironmentRun::get();
  if (run.environment)
    if (auto loaded = runtime::load_from_environment(*run.environment, device, kernel, hash,
                                                     kAsGiven, {}, run.statistics))
      return loaded;
  auto compiled = device.compile(kernel);
  if (run.environment)
    ++run.jit_compiles;
  if (!run.collect_dir.empty())
    collect(run.collect_dir, device.info().backend, kernel, hash.hex());
  return compiled;
}

} // namespace

std::vector<ir::Diagnostic> run_on_device(runtime::Device &device, const ir::Kernel &kernel,
                                          std::span<const ir::Argument> args,
                                          const ir::LaunchConfig &config) {
  // Compiled kernels by (device, structural hash): a case launches one kernel several times.
  static std::map<std::pair<runtime::Device *, std::string>,
                  std::unique_ptr<runtime::CompiledKernel>>
      compiled;
  // One stream per device, kept like the device.
  static std::map<runtime::Device *, std::unique_ptr<runtime::DeviceStream>> streams;
  std::unique_ptr<runtime::DeviceStream> &stream = streams[&device];
  std::vector<ir::Diagnostic> problems;
  std::vector<runtime::DeviceMemory> memories;
  try {
    if (!stream)
      stream = device.create_stream();
    ir::Hash128 hash = ir::structural_hash(kernel);
    auto &slot = compiled[{&device, hash.hex()}];
    if (!slot)
      slot = compile(device, kernel, hash);
    std::vector<runtime::LaunchArg> launch_args;
    memories.reserve(args.size()); // the launch arguments point into it
    for (const ir::Argument &a : args) {
      runtime::LaunchArg arg;
      if (a.buffer) {
        uint64_t bytes = a.buffer->bytes.size();
        memories.push_back(device.allocate(bytes ? bytes : 1));
        stream->upload(memories.back(), 0, a.buffer->bytes.data(), bytes);
        arg.memory = &memories.back();
        arg.bytes = bytes;
      } else {
        arg.bits = a.bits;
      }
      launch_args.push_back(std::move(arg));
    }
    stream->launch(*slot, config.num_workgroups, launch_args);
    stream->synchronize();
    size_t m = 0;
    for (const ir::Argument &a : args)
      if (a.buffer) {
        stream->download(memories[m++], 0, a.buffer->bytes.data(), a.buffer->bytes.size());
      }
  } catch (const std::exception &e) {
    problems.push_back({"", 0, 0, e.what(), {}});
  }
  try {
    if (stream)
      stream->synchronize(); // memory is freed only once no queued work uses it
  } catch (const std::exception &e) {
    if (problems.empty())
      problems.push_back({"", 0, 0, e.what(), {}});
  }
  for (runtime::DeviceMemory &memory : memories)
    device.free(memory);
  return problems;
}

} // namespace cubecc::test
