//===- env_bench.cpp - Cold start with and without an environment bundle ----------------------===//
//
// What an environment bundle saves an application that starts cold, measured side by side in one
// run (these machines are noisy: compare the ratios, which come from the same run):
//
//  1. Per example kernel, the work before the driver loads a module. JIT: trace into a fresh
//     module, structural hash, passes (-O2), emit, then NVRTC to an sm_90 CUBIN (CUDA) or the
//     SPIR-V writer and validator (Vulkan). Environment: trace, structural hash, and the bundle
//     lookup — the entry's first use, so its verification (checksum, FlatBuffers verifier) is
//     timed: a freshly opened bundle per repetition. By name: the lookup by library, kernel and
//     configuration alone (Runtime::kernel_from_environment: no trace, no hash), also the
//     entry's first use. The bytes found are compared with a fresh compile's.
//  2. A synthetic bundle of 10,000 entries (a 4 KiB SPIR-V-like and a 6 KiB CUBIN-like artifact
//     each): Bundle::open, and lookups of random keys (first use, warm, miss) and by name (first
//     use, warm).
//  3. On lavapipe, from a fresh Runtime to the downloaded result of one kernel (trace, load,
//     upload, launch, synchronize, download) without an environment and with one (opening the
//     bundle and use_environment are timed). Mesa's shader cache is off, so lavapipe compiles
//     the SPIR-V at pipeline creation in both cases.
//
// Each measurement runs once to warm up, then `--reps` times; the median is reported. Prints
// tables, then one JSON object per row.
//
// Usage: env_bench [--reps N] [--kernel NAME] [--entries N] [--no-lavapipe] [--keep DIR]
//        env_bench --bundle FILE [--reps N]   (part 2 only, on a real bundle: open and lookups)
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/codegen/cuda.h"
#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/codegen/target.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/environments/builder.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/files.h"
#include "cubecc/runtime/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cubecc;

namespace {

using bench::Clock;
using bench::json_number;
using bench::ms_since;

/// The library name the example kernels are filed under in the bench's bundles.
constexpr const char *kLibrary = "examples";

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "env_bench: %s\n", message.c_str());
  std::exit(1);
}

/// Runs `body` once to warm up, then `reps` times; `body` returns the time it measured (its own
/// setup stays outside). Returns the median in the unit `body` uses.
double median_of(int reps, const std::function<double()> &body) {
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    double t = body();
    if (r > 0)
      times.push_back(t);
  }
  return bench::median(times);
}

/// The registered kernel traced into a fresh module of its own; dies on errors.
std::unique_ptr<ir::Module> trace(const dsl::RegisteredKernel &k) {
  auto module = std::make_unique<ir::Module>();
  std::vector<ir::Diagnostic> errors;
  k.trace(*module, k, errors);
  if (!errors.empty())
    die(k.name + ": trace failed: " + ir::to_string(errors));
  return module;
}

const dsl::RegisteredKernel &registered(const std::string &name) {
  for (const auto &k : dsl::registered_kernels())
    if (k.name == name)
      return k;
  die("no registered kernel " + name);
}

//===- 1. Per kernel: JIT against the environment, before the driver -----------------------===//

struct ColdStartRow {
  std::string kernel, configuration;
  double cuda_jit_ms = NAN, cuda_env_us = NAN, cuda_lookup_us = NAN, cuda_by_name_us = NAN;
  bool cubin_equal = false;
  double vulkan_jit_ms = NAN, vulkan_env_us = NAN, vulkan_lookup_us = NAN, vulkan_by_name_us = NAN;
  bool spirv_equal = false;
};

/// The environment path: trace, hash, and the first lookup of the entry in a freshly opened
/// bundle. Returns the time of all three and of the lookup alone (µs), and the bytes found.
void time_environment_path(const dsl::RegisteredKernel &k, const std::string &bundle_path,
                           const runtime::BinaryTarget &target, int reps, double &total_us,
                           double &lookup_us, std::string &bytes) {
  // The JIT path verifies the trace (the runtime does before compiling); this path does not: the
  // kernel was verified when the bundle was built, and the runtime does not verify it again.
  dsl::RegisteredKernel unverified = k;
  unverified.options.verify = false;
  std::vector<double> totals, lookups;
  for (int r = 0; r <= reps; ++r) {
    std::shared_ptr<const environments::Bundle> bundle = environments::Bundle::open(bundle_path);
    auto start = Clock::now();
    std::unique_ptr<ir::Module> module = trace(unverified);
    ir::Hash128 hash = ir::structural_hash(*module->kernels()[0]);
    auto lookup_start = Clock::now();
    runtime::EnvironmentLookup found =
        bundle->find_kernel(hash, runtime::kRuntimeCompileOptions, {&target, 1});
    double lookup = ms_since(lookup_start) * 1000, total = ms_since(start) * 1000;
    if (found.outcome != runtime::EnvironmentLookup::Hit)
      die(fmt::format("{}: {} lookup did not hit: {}", k.name, target.target, found.why));
    bytes.assign(found.binary.bytes);
    if (r > 0) {
      totals.push_back(total);
      lookups.push_back(lookup);
    }
  }
  total_us = bench::median(totals);
  lookup_us = bench::median(lookups);
}

/// The lookup by name (no trace, no hash) of the entry's first use in a freshly opened bundle
/// (µs); the bytes it finds must be `expected`.
double time_lookup_by_name(const dsl::RegisteredKernel &k, const std::string &bundle_path,
                           const runtime::BinaryTarget &target, int reps,
                           const std::string &expected) {
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    std::shared_ptr<const environments::Bundle> bundle = environments::Bundle::open(bundle_path);
    auto start = Clock::now();
    runtime::NamedKernelLookup found = bundle->find_named_kernel(
        kLibrary, k.name, k.configuration, runtime::kRuntimeCompileOptions, {&target, 1});
    double us = ms_since(start) * 1000;
    if (found.lookup.outcome != runtime::EnvironmentLookup::Hit)
      die(fmt::format("{}: {} lookup by name did not hit: {}", k.name, target.target,
                      found.lookup.why));
    if (found.lookup.binary.bytes != expected)
      die(fmt::format("{}: the {} lookup by name found other bytes than the lookup by hash", k.name,
                      target.target));
    if (r > 0)
      times.push_back(us);
  }
  return bench::median(times);
}

std::vector<ColdStartRow> cold_start(const std::vector<const dsl::RegisteredKernel *> &kernels,
                                     const std::string &bundle_path, int reps) {
  const runtime::BinaryTarget cuda_target{"cuda:sm_90", "cubin", "", codegen::cuda_toolkit()};
  const codegen::TargetFeatures vulkan_features = codegen::TargetFeatures::vulkan_baseline();
  const runtime::BinaryTarget vulkan_target{"vulkan", "spirv", vulkan_features.fingerprint(), ""};
  std::vector<ColdStartRow> rows;
  for (const dsl::RegisteredKernel *k : kernels) {
    ColdStartRow row{k->name, k->configuration};
    std::string jit_cubin, env_cubin, jit_spirv, env_spirv;

    row.cuda_jit_ms = median_of(reps, [&] {
      auto start = Clock::now();
      std::unique_ptr<ir::Module> module = trace(*k);
      ir::Hash128 hash = ir::structural_hash(*module->kernels()[0]);
      std::vector<ir::Diagnostic> errors = passes::optimize(*module, 2);
      std::optional<codegen::CudaBinary> binary;
      if (errors.empty())
        binary = codegen::compile_cuda(*module->kernels()[0], {"sm_90"}, errors,
                                       codegen::CudaOutputs::Cubins);
      double ms = ms_since(start);
      if (!binary || binary->cubins.empty())
        die(fmt::format("{}: CUDA JIT failed: {}", k->name, ir::to_string(errors)));
      (void)hash;
      jit_cubin = binary->cubins[0].bytes;
      return ms;
    });
    time_environment_path(*k, bundle_path, cuda_target, reps, row.cuda_env_us, row.cuda_lookup_us,
                          env_cubin);
    row.cuda_by_name_us = time_lookup_by_name(*k, bundle_path, cuda_target, reps, env_cubin);
    row.cubin_equal = jit_cubin == env_cubin;

    row.vulkan_jit_ms = median_of(reps, [&] {
      auto start = Clock::now();
      std::unique_ptr<ir::Module> module = trace(*k);
      ir::Hash128 hash = ir::structural_hash(*module->kernels()[0]);
      std::vector<ir::Diagnostic> errors = passes::optimize(*module, 2);
      std::optional<codegen::SpirvKernel> spirv;
      std::string problems;
      if (errors.empty())
        spirv = codegen::emit_spirv(*module->kernels()[0], vulkan_features, errors);
      if (spirv)
        problems = codegen::validate_spirv(spirv->words);
      double ms = ms_since(start);
      if (!spirv || !problems.empty())
        die(fmt::format("{}: Vulkan JIT failed: {}{}", k->name, ir::to_string(errors), problems));
      (void)hash;
      jit_spirv.assign(reinterpret_cast<const char *>(spirv->words.data()),
                       spirv->words.size() * 4);
      return ms;
    });
    time_environment_path(*k, bundle_path, vulkan_target, reps, row.vulkan_env_us,
                          row.vulkan_lookup_us, env_spirv);
    row.vulkan_by_name_us = time_lookup_by_name(*k, bundle_path, vulkan_target, reps, env_spirv);
    row.spirv_equal = jit_spirv == env_spirv;
    rows.push_back(row);
  }
  return rows;
}

//===- 2. A synthetic 10,000-entry bundle ---------------------------------------------------===//

struct SyntheticResult {
  size_t entries = 0;
  uint64_t file_bytes = 0;
  double write_ms = NAN;
  double open_ms = NAN, open_min_ms = NAN, open_max_ms = NAN;
  double cold_open_ms = NAN; ///< the file's pages dropped from the page cache first
  double hit_first_us = NAN, hit_warm_us = NAN, miss_us = NAN;
  /// Lookups by name (library, kernel, configuration): NAN if the entries record no library.
  double by_name_first_us = NAN, by_name_warm_us = NAN;
  size_t lookups = 0;
  /// Read whole into memory (Bundle::OpenMode::InMemory): the open, and warm hits (no fstat of
  /// the file per lookup: there is no file to change under it).
  double in_memory_open_ms = NAN, in_memory_hit_warm_us = NAN;
  /// The file signed with a new key: read into memory and its signature verified (what a runtime
  /// requiring signatures does before it uses a bundle).
  double signed_open_ms = NAN;
};

std::string random_bytes(std::mt19937_64 &rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t word = rng();
    std::memcpy(&s[i], &word, 8);
  }
  return s;
}

void measure_file(const std::string &path, int reps, SyntheticResult &result);

SyntheticResult synthetic(size_t count, const std::string &path, int reps) {
  SyntheticResult result;
  result.entries = count;
  std::mt19937_64 rng(2026);
  // A real kernel's launch metadata, renamed per entry.
  std::unique_ptr<ir::Module> axpy = trace(registered("axpy"));
  codegen::KernelAbi abi = codegen::KernelAbi::of(*axpy->kernels()[0]);
  std::vector<std::string> parameter_names;
  for (unsigned i = 0; i < axpy->kernels()[0]->body().num_arguments(); ++i)
    parameter_names.push_back(axpy->kernels()[0]->body().argument(i)->name());
  const std::string fingerprint = codegen::TargetFeatures::vulkan_baseline().fingerprint();
  const std::string toolkit = codegen::cuda_toolkit();

  environments::BundleContents contents;
  contents.metadata = environments::current_metadata("env_bench (synthetic)");
  contents.metadata.targets = {"vulkan", "cuda:sm_90"};
  std::vector<ir::Hash128> hashes;
  for (size_t i = 0; i < count; ++i) {
    environments::Entry e;
    e.hash = {rng(), rng()};
    e.options = std::string(runtime::kRuntimeCompileOptions);
    e.name = fmt::format("synthetic_kernel_{:05}", i);
    e.configuration = "width=1";
    e.library = "synthetic";
    e.parameter_names = parameter_names;
    abi.name = e.name;
    std::string spirv = random_bytes(rng, 4096);
    const uint32_t magic = 0x07230203; // SPIR-V's first word
    std::memcpy(spirv.data(), &magic, 4);
    e.artifacts.push_back({{"vulkan", "spirv", fingerprint, ""}, "", abi, std::move(spirv)});
    e.artifacts.push_back(
        {{"cuda:sm_90", "cubin", "", toolkit}, e.name, abi, random_bytes(rng, 6144)});
    hashes.push_back(e.hash);
    contents.entries.push_back(std::move(e));
  }
  auto write_start = Clock::now();
  environments::write_bundle(path, contents);
  result.write_ms = ms_since(write_start);
  contents = {};
  measure_file(path, reps, result);
  return result;
}

/// Opening `path` and looking its kernels up, into `result` (its entries and file size too).
void measure_file(const std::string &path, int reps, SyntheticResult &result) {
  std::mt19937_64 rng(2026);
  // The keys, and each entry's first binary as the target to ask for.
  std::vector<ir::Hash128> hashes;
  std::vector<runtime::BinaryTarget> wants;
  struct Name {
    std::string library, kernel, configuration;
  };
  std::vector<Name> names;
  {
    std::shared_ptr<const environments::Bundle> bundle = environments::Bundle::open(path);
    for (size_t i = 0; i < bundle->num_entries(); ++i) {
      std::string error;
      auto e = bundle->read_entry(i, error);
      if (!e || e->artifacts.empty() || e->options != runtime::kRuntimeCompileOptions)
        die(fmt::format("{}: entry {} cannot be looked up: {}", path, i, error));
      hashes.push_back(e->hash);
      wants.push_back(e->artifacts.front().target);
      names.push_back({e->library, e->name, e->configuration});
    }
  }
  const size_t count = hashes.size();
  result.entries = count;

  // Opening: mmap, the header, the index's checksum and verifier. The file was just written, so
  // its pages are in the page cache (as for an application that starts again).
  std::vector<double> opens;
  for (int r = 0; r <= std::max(reps, 20); ++r) {
    auto start = Clock::now();
    std::shared_ptr<const environments::Bundle> bundle = environments::Bundle::open(path);
    double ms = ms_since(start);
    if (bundle->num_entries() != count)
      die("the bundle has the wrong number of entries");
    result.file_bytes = bundle->file_bytes();
    if (r > 0)
      opens.push_back(ms);
  }
  result.open_ms = bench::median(opens);
  result.open_min_ms = *std::min_element(opens.begin(), opens.end());
  result.open_max_ms = *std::max_element(opens.begin(), opens.end());

  // Lookups of random keys: the first (the entry is verified then) and the second (warm) in one
  // freshly opened bundle, then keys it does not hold.
  const size_t n = std::min<size_t>(count, 1000);
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i)
    order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::shared_ptr<const environments::Bundle> bundle = environments::Bundle::open(path);
  auto time_lookups = [&](auto &&key_of, runtime::EnvironmentLookup::Outcome expected) {
    std::vector<double> us;
    for (size_t i = 0; i < n; ++i) {
      ir::Hash128 hash = key_of(i);
      const runtime::BinaryTarget &want = wants[order[i]];
      auto start = Clock::now();
      runtime::EnvironmentLookup found =
          bundle->find_kernel(hash, runtime::kRuntimeCompileOptions, {&want, 1});
      us.push_back(ms_since(start) * 1000);
      if (found.outcome != expected)
        die("synthetic lookup: unexpected outcome: " + found.why);
    }
    return bench::median(us);
  };
  result.hit_first_us =
      time_lookups([&](size_t i) { return hashes[order[i]]; }, runtime::EnvironmentLookup::Hit);
  result.hit_warm_us =
      time_lookups([&](size_t i) { return hashes[order[i]]; }, runtime::EnvironmentLookup::Hit);
  // Keys from a stream of their own: the seed above also made the synthetic bundle's keys, and
  // drawing from it again after the shuffle can land on one of them (a hit where a miss is due).
  std::mt19937_64 miss_rng(0x6d697373);
  result.miss_us = time_lookups(
      [&](size_t) {
        return ir::Hash128{miss_rng(), miss_rng()};
      },
      runtime::EnvironmentLookup::Miss);
  result.lookups = n;

  // By name, in a freshly opened bundle: first use, then warm.
  if (std::all_of(names.begin(), names.end(), [](const Name &x) { return !x.library.empty(); })) {
    bundle = environments::Bundle::open(path);
    auto time_by_name = [&] {
      std::vector<double> us;
      for (size_t i = 0; i < n; ++i) {
        const Name &name = names[order[i]];
        const runtime::BinaryTarget &want = wants[order[i]];
        auto start = Clock::now();
        runtime::NamedKernelLookup found =
            bundle->find_named_kernel(name.library, name.kernel, name.configuration,
                                      runtime::kRuntimeCompileOptions, {&want, 1});
        us.push_back(ms_since(start) * 1000);
        if (found.lookup.outcome != runtime::EnvironmentLookup::Hit ||
            found.hash != hashes[order[i]])
          die("synthetic lookup by name: unexpected outcome: " + found.lookup.why);
      }
      return bench::median(us);
    };
    result.by_name_first_us = time_by_name();
    result.by_name_warm_us = time_by_name();
  }

  // Read into memory: the open, then first and warm hits on the copy.
  result.in_memory_open_ms = median_of(reps, [&] {
    auto start = Clock::now();
    auto b = environments::Bundle::open(path, environments::Bundle::OpenMode::InMemory);
    return ms_since(start);
  });
  bundle = environments::Bundle::open(path, environments::Bundle::OpenMode::InMemory);
  time_lookups([&](size_t i) { return hashes[order[i]]; }, runtime::EnvironmentLookup::Hit);
  result.in_memory_hit_warm_us =
      time_lookups([&](size_t i) { return hashes[order[i]]; }, runtime::EnvironmentLookup::Hit);

  // Signed: read whole and verified, a fresh Bundle each time (it verifies once per open).
  {
    std::span<const uint8_t> bytes = bundle->bytes();
    environments::SecretKey key = environments::generate_secret_key();
    const std::string signed_path = path + ".signed";
    runtime::write_file_atomically(
        signed_path,
        environments::sign_bundle(
            std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()), key));
    const std::vector<environments::PublicKey> trusted = {key.public_key()};
    result.signed_open_ms = median_of(reps, [&] {
      auto start = Clock::now();
      auto b = environments::Bundle::open(signed_path, environments::Bundle::OpenMode::InMemory);
      if (std::string why = b->signature_refusal(trusted); !why.empty())
        die(signed_path + ": " + why);
      return ms_since(start);
    });
    std::filesystem::remove(signed_path);
  }
  bundle.reset(); // a mapped page is not evicted

  // Opening again with this file's pages evicted from the page cache first (only this file's: its
  // pages are clean after write_bundle's fsync, so POSIX_FADV_DONTNEED drops them), as for the
  // first start after a reboot; the header and the index are read from the disk.
  result.cold_open_ms = median_of(reps, [&] {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
      die("cannot evict " + path + " from the page cache");
    ::close(fd);
    auto start = Clock::now();
    std::shared_ptr<const environments::Bundle> bundle = environments::Bundle::open(path);
    return ms_since(start);
  });
}

//===- 3. Time to the first result on lavapipe ----------------------------------------------===//

struct FirstResultRow {
  std::string kernel, problem;
  double runtime_open_ms = NAN;
  double jit_ms = NAN, jit_load_ms = NAN;
  double env_ms = NAN, env_load_ms = NAN;
  double warm_ms = NAN; ///< the same run again on the same runtime: the pipeline already compiled
  bool results_equal = false, matches_host = false;
  uint64_t env_hits = 0, env_compiles = 0;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

/// One example kernel run once on a runtime: its inputs, launch and host reference.
struct FirstResultCase {
  std::string kernel, problem;
  /// Uploads, launches, synchronizes and downloads the result.
  std::function<std::vector<float>(runtime::Runtime &, const runtime::KernelHandle &)> run;
  std::function<bool(const std::vector<float> &)> matches_host;
};

std::vector<FirstResultCase> first_result_cases() {
  std::vector<FirstResultCase> cases;
  { // axpy, 2^20 elements: bit-exact against the host
    const uint32_t n = 1 << 20;
    auto x = std::make_shared<std::vector<float>>(random_floats(n, 1));
    auto y = std::make_shared<std::vector<float>>(random_floats(n, 2));
    cases.push_back({"axpy", "n = 2^20",
                     [=](runtime::Runtime &rt, const runtime::KernelHandle &k) {
                       runtime::Buffer dx = rt.upload(*x), dy = rt.upload(*y);
                       rt.launch(k, runtime::grid_1d(n, 256), dx, n, 1u, dy, n, 1u, 2.0f);
                       rt.synchronize();
                       return rt.download<float>(dy);
                     },
                     [=](const std::vector<float> &got) {
                       for (uint32_t i = 0; i < n; ++i) {
                         volatile float product = 2.0f * (*x)[i];
                         if (got[i] != product + (*y)[i])
                           return false;
                       }
                       return true;
                     }});
  }
  { // softmax, 1024 rows of 1024: within a few ulps of the host in double
    const uint32_t rows = 1024, cols = 1024;
    auto in = std::make_shared<std::vector<float>>(random_floats(rows * cols, 3));
    cases.push_back(
        {"softmax", "1024 x 1024",
         [=](runtime::Runtime &rt, const runtime::KernelHandle &k) {
           runtime::Buffer din = rt.upload(*in), dout = rt.allocate<float>(rows * cols);
           rt.launch(k, {rows, 1, 1}, din, rows, cols, cols, 1u, dout, rows, cols, cols, 1u);
           rt.synchronize();
           return rt.download<float>(dout);
         },
         [=](const std::vector<float> &got) {
           for (uint32_t r = 0; r < rows; ++r) {
             const float *row = in->data() + size_t(r) * cols;
             double max = *std::max_element(row, row + cols), sum = 0;
             for (uint32_t c = 0; c < cols; ++c)
               sum += std::exp(double(row[c]) - max);
             for (uint32_t c = 0; c < cols; ++c) {
               double want = std::exp(double(row[c]) - max) / sum;
               if (std::abs(got[size_t(r) * cols + c] - want) > 1e-5 * want + 1e-9)
                 return false;
             }
           }
           return true;
         }});
  }
  { // matmul 256^3: bit-exact against the kernel's fma chain
    const uint32_t m = 256, kk = 256, n = 256;
    auto a = std::make_shared<std::vector<float>>(random_floats(m * kk, 4));
    auto b = std::make_shared<std::vector<float>>(random_floats(kk * n, 5));
    cases.push_back(
        {"matmul_16x16x16", "256^3",
         [=](runtime::Runtime &rt, const runtime::KernelHandle &k) {
           runtime::Buffer da = rt.upload(*a), db = rt.upload(*b), dc = rt.allocate<float>(m * n);
           rt.launch(k, {n / 16, m / 16, 1}, da, m, kk, kk, 1u, db, kk, n, n, 1u, dc, m, n, n, 1u);
           rt.synchronize();
           return rt.download<float>(dc);
         },
         [=](const std::vector<float> &c) {
           for (uint32_t i = 0; i < m; ++i)
             for (uint32_t j = 0; j < n; ++j) {
               float acc = 0;
               for (uint32_t p = 0; p < kk; ++p)
                 acc = std::fma((*a)[i * kk + p], (*b)[p * n + j], acc);
               if (c[i * n + j] != acc)
                 return false;
             }
           return true;
         }});
  }
  return cases;
}

std::vector<FirstResultRow> first_result(const std::string &bundle_path, int reps) {
  std::vector<FirstResultRow> rows;
  for (const FirstResultCase &c : first_result_cases()) {
    const dsl::RegisteredKernel &k = registered(c.kernel);
    FirstResultRow row{c.kernel, c.problem};
    std::vector<double> opens, jit, jit_load, env, env_load, warm;
    std::vector<float> jit_result, env_result;
    // JIT and environment runs alternate, so drift in the machine's load hits both alike.
    for (int r = 0; r <= reps; ++r) {
      for (bool with_environment : {false, true}) {
        auto open_start = Clock::now();
        runtime::Runtime rt = runtime::Runtime::open("vulkan");
        double open_ms = ms_since(open_start);
        auto start = Clock::now();
        if (with_environment)
          rt.use_environment(environments::Bundle::open(bundle_path));
        std::unique_ptr<ir::Module> module = trace(k);
        auto load_start = Clock::now();
        runtime::KernelHandle handle = rt.load(*module->kernels()[0]);
        double load_ms = ms_since(load_start);
        std::vector<float> result = c.run(rt, handle);
        double ms = ms_since(start);
        auto warm_start = Clock::now();
        std::vector<float> again = c.run(rt, handle);
        double warm_ms = ms_since(warm_start);
        if (again != result)
          die(c.kernel + ": a second run gave another result");
        if (r == 0)
          continue;
        warm.push_back(warm_ms);
        opens.push_back(open_ms);
        (with_environment ? env : jit).push_back(ms);
        (with_environment ? env_load : jit_load).push_back(load_ms);
        (with_environment ? env_result : jit_result) = std::move(result);
        if (with_environment) {
          row.env_hits = rt.environment_statistics().hits;
          row.env_compiles = rt.cache_statistics().compiles;
        }
      }
    }
    row.runtime_open_ms = bench::median(opens);
    row.jit_ms = bench::median(jit);
    row.jit_load_ms = bench::median(jit_load);
    row.env_ms = bench::median(env);
    row.env_load_ms = bench::median(env_load);
    row.warm_ms = bench::median(warm);
    row.results_equal = jit_result == env_result;
    row.matches_host = c.matches_host(jit_result) && c.matches_host(env_result);
    rows.push_back(row);
  }
  return rows;
}

} // namespace

int main(int argc, char **argv) try {
  // Before any device opens: Mesa's on-disk shader cache would otherwise hide lavapipe's compile
  // from every run after the first.
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);

  int reps = 5;
  size_t synthetic_entries = 10000;
  bool lavapipe = true;
  std::string only, keep, given_bundle;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--kernel") && i + 1 < argc)
      only = argv[++i];
    else if (!std::strcmp(argv[i], "--entries") && i + 1 < argc)
      synthetic_entries = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--no-lavapipe"))
      lavapipe = false;
    else if (!std::strcmp(argv[i], "--keep") && i + 1 < argc)
      keep = argv[++i];
    else if (!std::strcmp(argv[i], "--bundle") && i + 1 < argc)
      given_bundle = argv[++i];
    else
      die("usage: env_bench [--reps N] [--kernel NAME] [--entries N] [--no-lavapipe] "
          "[--keep DIR] | --bundle FILE [--reps N]");
  }
  if (!given_bundle.empty()) { // only part 2, on a bundle `cubecc env build` made
    SyntheticResult s;
    measure_file(given_bundle, reps, s);
    std::printf("%s: %zu entries, %.1f MiB\n", given_bundle.c_str(), s.entries,
                s.file_bytes / 1048576.0);
    std::printf("   Bundle::open: median %.3f ms (min %.3f, max %.3f); page cache evicted: %.3f "
                "ms\n",
                s.open_ms, s.open_min_ms, s.open_max_ms, s.cold_open_ms);
    std::printf("   find_kernel, median of %zu random keys: hit, first use %.2f us; hit, warm "
                "%.2f us; miss %.2f us\n",
                s.lookups, s.hit_first_us, s.hit_warm_us, s.miss_us);
    std::printf("   find_named_kernel, the same kernels by name: first use %.2f us; warm %.2f us "
                "(nan: the bundle records no library names)\n",
                s.by_name_first_us, s.by_name_warm_us);
    std::printf("   read into memory: open %.3f ms, hit, warm %.2f us; signed: open and verify "
                "%.3f ms\n",
                s.in_memory_open_ms, s.in_memory_hit_warm_us, s.signed_open_ms);
    std::printf(
        "%s\n",
        fmt::format(
            R"({{"bench": "bundle_file", "file": "{}", "entries": {}, "file_bytes": {}, "open_ms": {}, "cold_open_ms": {}, "lookups": {}, "hit_first_use_us": {}, "hit_warm_us": {}, "miss_us": {}, "by_name_first_use_us": {}, "by_name_warm_us": {}, "in_memory_open_ms": {}, "in_memory_hit_warm_us": {}, "signed_open_verify_ms": {}}})",
            given_bundle, s.entries, s.file_bytes, json_number(s.open_ms),
            json_number(s.cold_open_ms), s.lookups, json_number(s.hit_first_us),
            json_number(s.hit_warm_us), json_number(s.miss_us), json_number(s.by_name_first_us),
            json_number(s.by_name_warm_us), json_number(s.in_memory_open_ms),
            json_number(s.in_memory_hit_warm_us), json_number(s.signed_open_ms))
            .c_str());
    return 0;
  }
  std::string why_cuda;
  std::string nvrtc = codegen::nvrtc_version(&why_cuda);
  if (nvrtc.empty())
    die("NVRTC is not available: " + why_cuda);

  namespace fs = std::filesystem;
  fs::path dir = keep.empty() ? fs::temp_directory_path() / fmt::format("env_bench.{}", getpid())
                              : fs::path(keep);
  fs::create_directories(dir);
  const std::string bundle_path = (dir / "examples.cubeenv").string();
  const std::string synthetic_path = (dir / "synthetic.cubeenv").string();

  // The bundle of the example kernels, as `cubecc env build` makes it.
  std::vector<const dsl::RegisteredKernel *> kernels;
  std::vector<std::unique_ptr<ir::Module>> traced;
  std::vector<environments::KernelInput> inputs;
  for (const auto &k : dsl::registered_kernels()) {
    if (!only.empty() && k.name != only)
      continue;
    kernels.push_back(&k);
    traced.push_back(trace(k));
    inputs.push_back({traced.back()->kernels()[0].get(), k.configuration, kLibrary});
  }
  if (kernels.empty())
    die("no registered kernel " + only);
  if (lavapipe)
    for (const char *name : {"axpy", "softmax", "matmul_16x16x16"})
      if (std::none_of(kernels.begin(), kernels.end(), [&](auto *k) { return k->name == name; })) {
        traced.push_back(trace(registered(name)));
        inputs.push_back(
            {traced.back()->kernels()[0].get(), registered(name).configuration, kLibrary});
      }
  std::vector<ir::Diagnostic> errors;
  auto build_start = Clock::now();
  environments::BuildOptions build;
  build.targets = {"cuda:sm_90", "vulkan", "interp"};
  build.opt_level = 2;
  std::optional<environments::BundleContents> contents =
      environments::build_entries(inputs, build, errors);
  double build_s = ms_since(build_start) / 1000;
  if (!contents)
    die("building the bundle failed: " + ir::to_string(errors));
  environments::write_bundle(bundle_path, *contents);
  std::printf("NVRTC %s; bundle of %zu kernels for cuda:sm_90, vulkan, interp built in %.1f s "
              "(%ju bytes); median of %d runs after one warm-up\n\n",
              nvrtc.c_str(), inputs.size(), build_s, (uintmax_t)fs::file_size(bundle_path), reps);

  std::vector<std::string> json;

  std::vector<ColdStartRow> cold = cold_start(kernels, bundle_path, reps);
  std::printf("1. Cold start before the driver's module load: JIT (trace, hash, -O2, emit, "
              "NVRTC sm_90 | SPIR-V + validate) vs environment (trace, hash, first lookup) and by "
              "name (first lookup by library, kernel, configuration: no trace, no hash)\n");
  std::printf("%-16s %8s %7s %6s %7s %6s %4s | %7s %6s %5s %7s %5s %4s\n", "kernel", "CUDA JIT",
              "env", "ratio", "name", "ratio", "same", "VK JIT", "env", "ratio", "name", "ratio",
              "same");
  std::printf("%-16s %8s %7s %6s %7s %6s %4s | %7s %6s %5s %7s %5s %4s\n", "", "ms", "us", "", "us",
              "", "", "ms", "us", "", "us", "", "");
  for (const ColdStartRow &r : cold) {
    double cuda_ratio = r.cuda_jit_ms * 1000 / r.cuda_env_us;
    double cuda_by_name_ratio = r.cuda_jit_ms * 1000 / r.cuda_by_name_us;
    double vulkan_ratio = r.vulkan_jit_ms * 1000 / r.vulkan_env_us;
    double vulkan_by_name_ratio = r.vulkan_jit_ms * 1000 / r.vulkan_by_name_us;
    std::printf("%-16s %8.2f %7.1f %5.0fx %7.1f %5.0fx %4s | %7.3f %6.1f %4.0fx %7.1f %4.0fx %4s\n",
                r.kernel.c_str(), r.cuda_jit_ms, r.cuda_env_us, cuda_ratio, r.cuda_by_name_us,
                cuda_by_name_ratio, r.cubin_equal ? "yes" : "NO", r.vulkan_jit_ms, r.vulkan_env_us,
                vulkan_ratio, r.vulkan_by_name_us, vulkan_by_name_ratio,
                r.spirv_equal ? "yes" : "NO");
    json.push_back(fmt::format(
        R"({{"bench": "cold_start", "kernel": "{}", "configuration": "{}", "cuda_jit_ms": {}, "cuda_env_us": {}, "cuda_lookup_us": {}, "cuda_ratio": {}, "cuda_by_name_us": {}, "cuda_by_name_ratio": {}, "cubin_equal": {}, "vulkan_jit_ms": {}, "vulkan_env_us": {}, "vulkan_lookup_us": {}, "vulkan_ratio": {}, "vulkan_by_name_us": {}, "vulkan_by_name_ratio": {}, "spirv_equal": {}}})",
        r.kernel, r.configuration, json_number(r.cuda_jit_ms), json_number(r.cuda_env_us),
        json_number(r.cuda_lookup_us), json_number(cuda_ratio), json_number(r.cuda_by_name_us),
        json_number(cuda_by_name_ratio), r.cubin_equal, json_number(r.vulkan_jit_ms),
        json_number(r.vulkan_env_us), json_number(r.vulkan_lookup_us), json_number(vulkan_ratio),
        json_number(r.vulkan_by_name_us), json_number(vulkan_by_name_ratio), r.spirv_equal));
  }

  SyntheticResult s = synthetic(synthetic_entries, synthetic_path, reps);
  std::printf("\n2. Synthetic bundle: %zu entries (4 KiB SPIR-V + 6 KiB CUBIN each), %.1f MiB, "
              "written in %.0f ms\n",
              s.entries, s.file_bytes / 1048576.0, s.write_ms);
  std::printf("   Bundle::open (mmap, header, index checksum + verify): median %.3f ms "
              "(min %.3f, max %.3f)\n",
              s.open_ms, s.open_min_ms, s.open_max_ms);
  std::printf("   Bundle::open with the file's pages evicted from the page cache: median %.3f ms\n",
              s.cold_open_ms);
  std::printf("   find_kernel, median of %zu random keys: hit, first use %.2f us; hit, warm "
              "%.2f us; miss %.2f us\n",
              s.lookups, s.hit_first_us, s.hit_warm_us, s.miss_us);
  std::printf("   find_named_kernel, the same kernels by name: first use %.2f us; warm %.2f us\n",
              s.by_name_first_us, s.by_name_warm_us);
  json.push_back(fmt::format(
      R"({{"bench": "synthetic_bundle", "entries": {}, "file_bytes": {}, "write_ms": {}, "open_ms": {}, "open_min_ms": {}, "open_max_ms": {}, "cold_open_ms": {}, "lookups": {}, "hit_first_use_us": {}, "hit_warm_us": {}, "miss_us": {}, "by_name_first_use_us": {}, "by_name_warm_us": {}}})",
      s.entries, s.file_bytes, json_number(s.write_ms), json_number(s.open_ms),
      json_number(s.open_min_ms), json_number(s.open_max_ms), json_number(s.cold_open_ms),
      s.lookups, json_number(s.hit_first_us), json_number(s.hit_warm_us), json_number(s.miss_us),
      json_number(s.by_name_first_us), json_number(s.by_name_warm_us)));

  if (lavapipe) {
    std::vector<FirstResultRow> first = first_result(bundle_path, reps);
    std::printf("\n3. Time to the first result on lavapipe (fresh Runtime each run; trace, load, "
                "upload, launch, synchronize, download; with: + open bundle + use_environment; "
                "warm: the same run again, pipeline compiled)\n");
    std::printf("%-16s %-12s %8s %9s %9s %9s %9s %7s %9s %6s %6s\n", "kernel", "problem", "rt open",
                "JIT", "JIT load", "env", "env load", "ratio", "warm", "same", "host");
    std::printf("%-16s %-12s %8s %9s %9s %9s %9s %7s %9s %6s %6s\n", "", "", "ms", "ms", "ms", "ms",
                "ms", "", "ms", "", "");
    for (const FirstResultRow &r : first) {
      double ratio = r.jit_ms / r.env_ms;
      std::printf("%-16s %-12s %8.1f %9.2f %9.2f %9.2f %9.2f %6.2fx %9.2f %6s %6s\n",
                  r.kernel.c_str(), r.problem.c_str(), r.runtime_open_ms, r.jit_ms, r.jit_load_ms,
                  r.env_ms, r.env_load_ms, ratio, r.warm_ms, r.results_equal ? "yes" : "NO",
                  r.matches_host ? "yes" : "NO");
      if (r.env_hits != 1 || r.env_compiles != 0)
        std::printf("   note: with the environment: %ju hits, %ju compiles\n",
                    (uintmax_t)r.env_hits, (uintmax_t)r.env_compiles);
      json.push_back(fmt::format(
          R"({{"bench": "lavapipe_first_result", "kernel": "{}", "problem": "{}", "runtime_open_ms": {}, "jit_ms": {}, "jit_load_ms": {}, "env_ms": {}, "env_load_ms": {}, "ratio": {}, "warm_ms": {}, "results_equal": {}, "matches_host": {}, "env_hits": {}, "env_compiles": {}}})",
          r.kernel, r.problem, json_number(r.runtime_open_ms), json_number(r.jit_ms),
          json_number(r.jit_load_ms), json_number(r.env_ms), json_number(r.env_load_ms),
          json_number(ratio), json_number(r.warm_ms), r.results_equal, r.matches_host, r.env_hits,
          r.env_compiles));
    }
  }

  std::printf("\n");
  for (const std::string &line : json)
    std::printf("%s\n", line.c_str());
  if (keep.empty())
    fs::remove_all(dir);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "env_bench: %s\n", e.what());
  return 1;
}
