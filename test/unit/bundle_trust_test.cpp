//===- bundle_trust_test.cpp - What a runtime does with a bundle it cannot trust --------------===//
//
// A bundle is a file: it can be damaged behind valid checksums (a writer bug, an edit, a tool that
// recomputes them), replaced under a running application, or not be a file at all. Here:
//   - binaries that a bundle holds with intact checksums but that disagree with their launch
//     metadata, the kernel, or the device (SPIR-V that does not validate, another LocalSize,
//     another binding, push constants the metadata lacks, too much shared memory; IR of another
//     shape or that does not parse): with fallback on, a rejected entry that is compiled instead
//     and computes the right result; with fallback off, an Error saying why;
//   - a FIFO or a directory given as a bundle is refused at once, naming the path;
//   - a bundle copied over (cp) while a runtime has it open is noticed and no longer used, never
//     a SIGBUS; one renamed over (mv) goes on being used;
//   - every byte of a small bundle (axpy and reduce_sum for vulkan and interp) flipped, as is and
//     behind recomputed checksums, then the kernels run through the runtime on interp and vulkan
//     with fallback on: right results, or a wrong result only where the flip made another valid
//     kernel of the same interface, which no check but a signature can tell (docs/environments.md,
//     "What a damaged bundle can do").
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/spirv.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/structural_hash.h"
#include "environment_test_support.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

using namespace cubecc;
using test::build;
using test::temp_file;
using test::traced_examples;

namespace {

//===- Helpers
//---------------------------------------------------------------------------------===//

std::vector<uint32_t> to_words(const std::string &bytes) {
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

std::string to_bytes(const std::vector<uint32_t> &words) {
  return std::string(reinterpret_cast<const char *>(words.data()), words.size() * 4);
}

/// The word offset of each instruction of a SPIR-V module (after its 5-word header).
std::vector<size_t> instructions(const std::vector<uint32_t> &words) {
  std::vector<size_t> at;
  for (size_t i = 5; i < words.size() && (words[i] >> 16) != 0; i += words[i] >> 16)
    at.push_back(i);
  return at;
}

/// The first instruction with `opcode` whose operand `operand` (0: the word after the opcode) is
/// `value`, or 0.
size_t find_instruction(const std::vector<uint32_t> &words, uint32_t opcode, size_t operand,
                        uint32_t value) {
  for (size_t i : instructions(words))
    if ((words[i] & 0xffff) == opcode && operand + 1 < (words[i] >> 16) &&
        words[i + 1 + operand] == value)
      return i;
  return 0;
}

// SPIR-V opcodes and enumerants the edits below use (spirv.hpp11 has them all).
constexpr uint32_t kOpExecutionMode = 16, kOpTypeArray = 28, kOpTypePointer = 32, kOpConstant = 43,
                   kOpVariable = 59, kOpDecorate = 71;
constexpr uint32_t kLocalSize = 17, kWorkgroup = 4, kBinding = 33;

environments::Artifact &artifact(environments::BundleContents &contents, const std::string &kernel,
                                 const std::string &target) {
  for (environments::Entry &e : contents.entries)
    for (environments::Artifact &a : e.artifacts)
      if (e.name == kernel && a.target.target == target)
        return a;
  throw std::runtime_error("no " + target + " artifact of " + kernel);
}

/// Edits `kernel`'s SPIR-V in `contents` with `edit` (which fails the test when the module is not
/// as expected); the module must still validate: the checks behind the validator are tested.
template <class Edit>
void edit_spirv(environments::BundleContents &contents, const std::string &kernel, Edit &&edit) {
  std::string &data = artifact(contents, kernel, "vulkan").data;
  std::vector<uint32_t> words = to_words(data);
  edit(words);
  data = to_bytes(words);
  EXPECT_EQ(codegen::validate_spirv(words), "");
}

/// Runs `kernel` (axpy or reduce_sum) and compares with its host reference.
void expect_right_results(runtime::Runtime &rt, const runtime::KernelHandle &handle,
                          const std::string &kernel) {
  if (kernel == "axpy")
    EXPECT_EQ(test::run_axpy(rt, handle), test::expected_axpy());
  else
    EXPECT_EQ(test::run_reduce_sum(rt, handle), test::expected_reduce_sum());
}

/// `contents` holds `kernel`'s entry with intact checksums, but unusable on `device`: with
/// fallback on, the entry is rejected and the kernel compiled, and it computes the right result;
/// with fallback off, loading it is an Error that contains `message`.
void expect_rejected(const std::string &device, const environments::BundleContents &contents,
                     const ir::Kernel &kernel, const std::string &message) {
  SCOPED_TRACE(device + ", kernel " + kernel.name() + ": " + message);
  auto bundle = environments::Bundle::from_bytes(environments::serialize_bundle(contents),
                                                 "doctored.cubeenv");
  runtime::Runtime rt = runtime::Runtime::open(device);
  rt.use_environment(bundle);
  runtime::KernelHandle handle;
  try {
    handle = rt.load(kernel);
  } catch (const runtime::Error &e) {
    ADD_FAILURE() << "an error although fallback is on: " << e.what();
    return;
  }
  EXPECT_EQ(rt.environment_statistics().rejected, 1u);
  EXPECT_EQ(rt.environment_statistics().hits, 0u);
  EXPECT_EQ(rt.cache_statistics().compiles, 1u);
  expect_right_results(rt, handle, kernel.name());

  runtime::Runtime strict = runtime::Runtime::open(device);
  strict.use_environment(bundle, {.fallback_to_jit = false});
  try {
    strict.load(kernel);
    ADD_FAILURE() << "an unusable entry was used";
  } catch (const runtime::Error &e) {
    std::string what = e.what();
    EXPECT_NE(what.find("kernel '" + kernel.name() + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("is unusable"), std::string::npos) << what;
    EXPECT_NE(what.find(message), std::string::npos) << what;
  }
}

/// The example module's axpy and reduce_sum.
struct Examples {
  std::unique_ptr<ir::Module> module = traced_examples();
  const ir::Kernel &axpy = *module->find_kernel("axpy");
  const ir::Kernel &reduce_sum = *module->find_kernel("reduce_sum");
};

} // namespace

//===- Binaries are checked on first use ---------------------------------------------------===//

TEST(BundleTrust, vulkan_spirv_that_does_not_validate_is_rejected_and_compiled) {
  Examples ex;
  auto contents = build({&ex.axpy}, {"vulkan"});
  std::string &data = artifact(contents, "axpy", "vulkan").data;
  data.resize(data.size() - 4); // without its OpFunctionEnd
  expect_rejected("vulkan", contents, ex.axpy, "its SPIR-V does not validate");
}

TEST(BundleTrust, vulkan_spirv_of_another_local_size_is_rejected_and_compiled) {
  // Valid SPIR-V, but 128 invocations per workgroup where the launches are sized for 256: half
  // of y would silently stay as it was.
  Examples ex;
  auto contents = build({&ex.axpy}, {"vulkan"});
  edit_spirv(contents, "axpy", [](std::vector<uint32_t> &words) {
    size_t mode = find_instruction(words, kOpExecutionMode, 1, kLocalSize);
    ASSERT_NE(mode, 0u);
    ASSERT_EQ(words[mode + 3], 256u);
    words[mode + 3] = 128;
  });
  expect_rejected("vulkan", contents, ex.axpy,
                  "its SPIR-V does not match its launch metadata: its LocalSize (128, 1, 1) is "
                  "not the launch metadata's workgroup size (256, 1, 1)");
}

TEST(BundleTrust, vulkan_spirv_with_a_binding_the_pipeline_lacks_is_rejected_and_compiled) {
  Examples ex;
  auto contents = build({&ex.axpy}, {"vulkan"});
  edit_spirv(contents, "axpy", [](std::vector<uint32_t> &words) {
    size_t binding = find_instruction(words, kOpDecorate, 1, kBinding);
    ASSERT_NE(binding, 0u);
    words[binding + 3] = 5;
  });
  expect_rejected("vulkan", contents, ex.axpy, "is not one of the 2 bindings of set 0");
}

TEST(BundleTrust, vulkan_metadata_without_the_push_constants_the_spirv_reads_is_rejected) {
  // The metadata moves the value parameters into a buffer: the pipeline would have no push
  // constants, and the module reads them.
  Examples ex;
  auto contents = build({&ex.axpy}, {"vulkan"});
  artifact(contents, "axpy", "vulkan").abi.param_block_in_buffer = true;
  expect_rejected("vulkan", contents, ex.axpy, "declares push constants (%");
}

TEST(BundleTrust, vulkan_spirv_beyond_the_devices_shared_memory_is_rejected_and_compiled) {
  Examples ex;
  auto contents = build({&ex.reduce_sum}, {"vulkan"});
  edit_spirv(contents, "reduce_sum", [](std::vector<uint32_t> &words) {
    // The shared array: the Workgroup variable's pointer type's pointee.
    size_t variable = find_instruction(words, kOpVariable, 2, kWorkgroup);
    ASSERT_NE(variable, 0u) << "reduce_sum has a shared array";
    size_t pointer = find_instruction(words, kOpTypePointer, 0, words[variable + 1]);
    ASSERT_NE(pointer, 0u);
    size_t array = find_instruction(words, kOpTypeArray, 0, words[pointer + 3]);
    ASSERT_NE(array, 0u);
    size_t length = find_instruction(words, kOpConstant, 1, words[array + 3]);
    ASSERT_NE(length, 0u);
    // A length of its own (the constant may have other uses): 4 Mi floats.
    uint32_t id = words[3]++;
    words[array + 3] = id;
    std::vector<uint32_t> constant = {(4u << 16) | kOpConstant, words[length + 1], id, 1u << 20};
    words.insert(words.begin() + static_cast<ptrdiff_t>(array), constant.begin(), constant.end());
  });
  expect_rejected("vulkan", contents, ex.reduce_sum, "bytes of shared memory");
}

TEST(BundleTrust, metadata_of_another_workgroup_size_than_the_kernels_is_rejected_and_compiled) {
  Examples ex;
  for (const char *device : {"vulkan", "interp"}) {
    auto contents = build({&ex.axpy}, {device});
    artifact(contents, "axpy", device).abi.workgroup_size = {128, 1, 1};
    expect_rejected(device, contents, ex.axpy,
                    "the binary's workgroup size (128, 1, 1) is not the kernel's (256, 1, 1)");
  }
}

TEST(BundleTrust, interp_ir_of_another_workgroup_size_than_its_metadata_is_rejected_and_compiled) {
  // The IR runs 128-wide workgroups, its metadata (and the kernel) 256: launches are sized by
  // the metadata, so the IR must not be used. (Before: an Error although fallback was on.)
  Examples ex;
  auto contents = build({&ex.axpy}, {"interp"});
  std::string &ir = artifact(contents, "axpy", "interp").data;
  size_t at = ir.find("workgroup(256, 1, 1)");
  ASSERT_NE(at, std::string::npos) << ir;
  ir.replace(at, 20, "workgroup(128, 1, 1)");
  expect_rejected("interp", contents, ex.axpy,
                  "its IR's workgroup size (128, 1, 1) is not the launch metadata's (256, 1, 1)");
}

TEST(BundleTrust, interp_ir_that_does_not_parse_is_rejected_and_compiled) {
  Examples ex;
  auto contents = build({&ex.axpy}, {"interp"});
  std::string &ir = artifact(contents, "axpy", "interp").data;
  ir.resize(ir.size() / 2);
  expect_rejected("interp", contents, ex.axpy, "its IR does not load");
}

//===- The file ------------------------------------------------------------------------------===//

TEST(BundleFile, a_fifo_or_a_directory_is_refused_at_once_naming_it) {
  std::string fifo = temp_file("bundle.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Opening a FIFO for reading would wait for a writer forever (the test would time out).
  try {
    environments::Bundle::open(fifo);
    ADD_FAILURE() << "opened a FIFO";
  } catch (const runtime::Error &e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": cannot open the environment bundle: not a regular "
                                            "file (a FIFO); cubecc reads only regular files");
  }
  std::string directory = temp_file("bundle.dir");
  std::filesystem::create_directories(directory);
  try {
    environments::Bundle::open(directory);
    ADD_FAILURE() << "opened a directory";
  } catch (const runtime::Error &e) {
    EXPECT_EQ(std::string(e.what()),
              directory + ": cannot open the environment bundle: not a "
                          "regular file (a directory); cubecc reads only regular files");
  }
  // CUBECC_ENV naming a FIFO: the runtime runs without it (a warning), or refuses when strict.
  setenv("CUBECC_ENV", fifo.c_str(), 1);
  runtime::Runtime rt = runtime::Runtime::open("interp");
  unsetenv("CUBECC_ENV");
  EXPECT_EQ(rt.environment(), nullptr);
  EXPECT_THROW(rt.use_environment(fifo, {.fallback_to_jit = false}), runtime::Error);
}

namespace {

/// What `cp new path` does to an existing `path`: truncates the file and writes into it (the
/// same inode: a process that mapped it sees the change).
void copy_over(const std::string &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

} // namespace

TEST(BundleFile, a_bundle_copied_over_while_in_use_is_no_longer_used_and_never_faults) {
  Examples ex;
  std::string path = temp_file("in-use.cubeenv");
  auto contents = build({&ex.axpy, &ex.reduce_sum}, {"vulkan", "interp"});
  contents.tuning.push_back({"axpy|n=1024|interp", R"({"winner":"width=1"})"});
  environments::write_bundle(path, contents);
  runtime::Runtime rt = runtime::Runtime::open("interp");
  rt.use_environment(path);
  runtime::Runtime strict = runtime::Runtime::open("interp");
  strict.use_environment(path, {.fallback_to_jit = false});
  rt.load(ex.axpy);
  EXPECT_EQ(rt.environment_statistics().hits, 1u);
  EXPECT_TRUE(rt.find_tuning_record("axpy|n=1024|interp"));
  uint64_t before = std::filesystem::file_size(path);

  // A copy in progress: the first 100 bytes of a new bundle. The old mapping now ends within its
  // first page; touching an entry beyond it would be SIGBUS.
  std::string replacement = environments::serialize_bundle(build({&ex.axpy}, {"interp"}));
  copy_over(path, replacement.substr(0, 100));
  runtime::KernelHandle reduce = rt.load(ex.reduce_sum);
  EXPECT_EQ(rt.environment_statistics().rejected, 1u);
  EXPECT_EQ(rt.cache_statistics().compiles, 1u);
  EXPECT_EQ(test::run_reduce_sum(rt, reduce), test::expected_reduce_sum());
  std::string expected = "the file changed size (" + std::to_string(before) +
                         " bytes, now 100) since it was opened, so it is no longer used: replace "
                         "a bundle that applications may have open by renaming the new file over "
                         "it (mv), never by copying over it (cp)";
  auto found = rt.environment()->find_kernel(ir::structural_hash(ex.axpy), "-O2",
                                             std::span(&test::kInterp, 1));
  EXPECT_EQ(found.outcome, runtime::EnvironmentLookup::Rejected);
  EXPECT_EQ(found.why, expected);
  // Finished copying: still another file than the one opened; nothing from it is used.
  copy_over(path, replacement);
  EXPECT_EQ(rt.find_tuning_record("axpy|n=1024|interp"), std::nullopt);
  try {
    strict.load(ex.reduce_sum);
    ADD_FAILURE() << "a strict runtime used a bundle copied over";
  } catch (const runtime::Error &e) {
    std::string changed = "the file changed size (" + std::to_string(before) + " bytes, now " +
                          std::to_string(replacement.size()) + ") since it was opened";
    EXPECT_NE(std::string(e.what()).find(changed), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(cp) (and compiling instead is off)"), std::string::npos)
        << e.what();
  }
}

TEST(BundleFile, a_bundle_edited_in_place_is_no_longer_used) {
  Examples ex;
  std::string path = temp_file("edited.cubeenv");
  environments::write_bundle(path, build({&ex.axpy}, {"interp"}));
  auto bundle = environments::Bundle::open(path);
  // One byte changed in place, a second later: same size, another modification time.
  std::string bytes = test::read_file(path);
  bytes[bytes.size() - 20] ^= 1;
  copy_over(path, bytes);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_sec += 1;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  auto found =
      bundle->find_kernel(ir::structural_hash(ex.axpy), "-O2", std::span(&test::kInterp, 1));
  EXPECT_EQ(found.outcome, runtime::EnvironmentLookup::Rejected);
  EXPECT_EQ(
      found.why.rfind("the file was modified since it was opened, so it is no longer used", 0), 0u)
      << found.why;
}

TEST(BundleFile, a_bundle_renamed_over_while_in_use_goes_on_being_used) {
  Examples ex;
  std::string path = temp_file("renamed.cubeenv");
  environments::write_bundle(path, build({&ex.axpy, &ex.reduce_sum}, {"interp"}));
  runtime::Runtime rt = runtime::Runtime::open("interp");
  rt.use_environment(path);
  std::string next = temp_file("renamed.cubeenv.new");
  environments::write_bundle(next, build({&ex.axpy}, {"interp"}));
  std::filesystem::rename(next, path); // what `mv` does: the open bundle is the old file
  rt.load(ex.axpy);
  rt.load(ex.reduce_sum);
  EXPECT_EQ(rt.environment_statistics().hits, 2u);
  EXPECT_EQ(rt.environment_statistics().rejected, 0u);
  EXPECT_EQ(rt.cache_statistics().compiles, 0u);
}

//===- Every byte flipped, as is and behind recomputed checksums -----------------------------===//

namespace {

/// Whether a SPIR-V opcode is a debug instruction (source, strings, names, lines).
bool debug_instruction(uint32_t opcode) {
  return (opcode >= 2 && opcode <= 8) || opcode == 317 /* OpNoLine */ ||
         opcode == 330 /* OpModuleProcessed */;
}

/// What of a SPIR-V module is code: all but the debug instructions (names, strings, source,
/// lines), the generator and the id bound.
std::string spirv_code(std::string_view bytes) {
  std::vector<uint32_t> words = to_words(std::string(bytes));
  if (words.size() < 5)
    return std::string(bytes);
  std::vector<uint32_t> code(words.begin(), words.begin() + 5);
  code[2] = code[3] = 0;
  for (size_t i : instructions(words)) {
    if (!debug_instruction(words[i] & 0xffff))
      code.insert(code.end(), words.begin() + i, words.begin() + i + (words[i] >> 16));
  }
  return to_bytes(code);
}

/// What of IR text is code: its structural hash (value names and locations do not count).
std::string ir_code(std::string_view text) {
  ir::ParseResult parsed = ir::parse_module(text, "flipped.cir");
  return parsed.module ? ir::structural_hash(*parsed.module).hex() : std::string(text);
}

struct Range {
  uint64_t begin = 0, end = 0;
  bool contains(uint64_t p) const { return p >= begin && p < end; }
};

/// One device of the sweep: one Runtime for every flip.
struct SweepDevice {
  std::string name;
  runtime::Runtime rt;
  std::vector<runtime::BinaryTarget> targets;
  std::string (*code)(std::string_view);
};

/// One kernel of the sweep.
struct SweepKernel {
  const ir::Kernel *kernel;
  ir::Hash128 hash;
  std::vector<float> (*run)(runtime::Runtime &, const runtime::KernelHandle &);
  std::vector<float> expected;
  Range entry;                               ///< its entry's bytes in the bundle
  std::map<std::string, Range> binary;       ///< per device: its binary's bytes in the bundle
  std::map<std::string, std::string> stored; ///< per device: the binary
};

/// What the flips did to the lookups of one device.
struct Tally {
  size_t lookups = 0, missed = 0, at_lookup = 0, at_load = 0, identical = 0, equal_code = 0,
         other_code = 0, wrong = 0;
};

/// Where a flip landed in a SPIR-V module.
struct FlipSite {
  /// In the code: a constant's instruction, or an instruction of a function body (not its debug
  /// information). Everything before the functions but the constants is the interface the
  /// runtime checks, or debug information.
  bool code = false;
  std::string text; ///< "word 3 of `%uint_8 = OpConstant %uint 8`"
};

/// The instruction of SPIR-V `binary` that holds byte `offset`.
FlipSite spirv_flip_site(const std::string &binary, uint64_t offset) {
  std::vector<uint32_t> words = to_words(binary);
  std::vector<size_t> at = instructions(words);
  size_t word = offset / 4;
  auto next = std::upper_bound(at.begin(), at.end(), word);
  if (word < 5 || next == at.begin())
    return {false, "the module's header"};
  size_t index = static_cast<size_t>(next - 1 - at.begin()), start = at[index];
  uint32_t op = words[start] & 0xffff;
  size_t first_function = words.size();
  for (size_t i : at)
    if ((words[i] & 0xffff) == 54 /* OpFunction */) {
      first_function = i;
      break;
    }
  bool constant = op == 41 || op == 42 || op == 43 || op == 44 || op == 46; // True .. Null
  FlipSite site;
  site.code = !debug_instruction(op) && (constant || start >= first_function);
  // The module's disassembly has one line per instruction, in order.
  std::istringstream lines(codegen::disassemble_spirv(words, /*header=*/false));
  std::string line;
  for (size_t k = 0; k <= index; ++k)
    std::getline(lines, line);
  line.erase(0, line.find_first_not_of(' '));
  site.text = fmt::format("word {} of `{}`", word - start, line);
  return site;
}

} // namespace

TEST(BundleFlips, every_byte_flip_as_is_and_resealed_runs_right_on_interp_and_vulkan) {
  // Lavapipe compiles every pipeline: no state from another run.
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  Examples ex;
  std::vector<SweepKernel> kernels = {
      {&ex.axpy, ir::structural_hash(ex.axpy), &test::run_axpy, test::expected_axpy(), {}, {}, {}},
      {&ex.reduce_sum,
       ir::structural_hash(ex.reduce_sum),
       &test::run_reduce_sum,
       test::expected_reduce_sum(),
       {},
       {},
       {}}};
  std::vector<SweepDevice> devices;
  devices.push_back({"interp", runtime::Runtime::open("interp"), {}, &ir_code});
  devices.push_back({"vulkan", runtime::Runtime::open("vulkan"), {}, &spirv_code});
  for (SweepDevice &d : devices)
    d.targets = d.rt.device().binary_targets();

  const std::string bytes =
      environments::serialize_bundle(build({&ex.axpy, &ex.reduce_sum}, {"vulkan", "interp"}));
  auto original = environments::Bundle::from_bytes(bytes, "original.cubeenv");
  ASSERT_EQ(original->num_entries(), kernels.size());
  for (size_t i = 0; i < original->num_entries(); ++i) {
    std::string error;
    auto entry = original->read_entry(i, error);
    ASSERT_TRUE(entry) << error;
    for (SweepKernel &k : kernels)
      if (k.hash == entry->hash) // the entry and the zero padding after it (to 16 bytes)
        k.entry = {original->entry_offset(i),
                   (original->entry_offset(i) + original->entry_bytes(i) + 15) / 16 * 16};
  }
  for (SweepKernel &k : kernels)
    for (SweepDevice &d : devices) {
      // The JIT-compiled kernel (what a rejected entry falls back to) is right...
      EXPECT_EQ(k.run(d.rt, d.rt.load(*k.kernel)), k.expected) << d.name << " " << k.kernel->name();
      // ... and so is the bundle's.
      auto found = original->find_kernel(k.hash, "-O2", d.targets);
      ASSERT_EQ(found.outcome, runtime::EnvironmentLookup::Hit) << found.why;
      k.stored[d.name] = std::string(found.binary.bytes);
      size_t at = bytes.find(k.stored[d.name], k.entry.begin);
      ASSERT_TRUE(at != std::string::npos && at + found.binary.bytes.size() <= k.entry.end);
      k.binary[d.name] = {at, at + found.binary.bytes.size()};
      runtime::EnvironmentStatistics stats;
      auto compiled = runtime::load_from_environment(*original, d.rt.device(), *k.kernel, k.hash,
                                                     "-O2", {}, stats);
      ASSERT_TRUE(compiled);
      EXPECT_EQ(k.run(d.rt, d.rt.adopt(*k.kernel, std::move(compiled))), k.expected);
    }

  auto start = std::chrono::steady_clock::now();
  size_t at_open[2] = {0, 0}, skipped = 0;
  std::map<std::string, Tally> tally[2];
  std::vector<std::string> wrong_cases;
  const char *variant_names[2] = {"as is", "resealed"};
  testing::internal::CaptureStderr(); // the runtime's warnings, one per new reason
  for (int resealed = 0; resealed < 2; ++resealed) {
    for (size_t p = 0; p < bytes.size(); ++p) {
      std::string flipped = bytes;
      flipped[p] = static_cast<char>(flipped[p] ^ 0xff);
      if (resealed)
        flipped = environments::reseal_for_testing(std::move(flipped));
      std::shared_ptr<const environments::Bundle> bundle;
      try {
        bundle = environments::Bundle::from_bytes(flipped, "flipped.cubeenv");
      } catch (const runtime::Error &) {
        ++at_open[resealed];
        continue;
      }
      for (SweepKernel &k : kernels) {
        // A flip in another kernel's entry or its padding leaves this one's bytes as they were
        // (resealing rewrites only that entry's checksum): the lookup would repeat the unflipped
        // bundle's.
        if (std::any_of(kernels.begin(), kernels.end(),
                        [&](const SweepKernel &o) { return &o != &k && o.entry.contains(p); })) {
          skipped += devices.size();
          continue;
        }
        for (SweepDevice &d : devices) {
          // Likewise a flip in the binary for the other device.
          if (std::any_of(devices.begin(), devices.end(), [&](const SweepDevice &o) {
                return &o != &d && k.binary[o.name].contains(p);
              })) {
            ++skipped;
            continue;
          }
          std::string where = fmt::format("{}, {}, byte {} flipped {}", d.name, k.kernel->name(), p,
                                          variant_names[resealed]);
          Tally &t = tally[resealed][d.name];
          ++t.lookups;
          runtime::EnvironmentLookup found = bundle->find_kernel(k.hash, "-O2", d.targets);
          runtime::EnvironmentStatistics stats;
          std::unique_ptr<runtime::CompiledKernel> compiled;
          try {
            // What Runtime::load does on a cache miss; null: it compiles the kernel instead.
            compiled = runtime::load_from_environment(*bundle, d.rt.device(), *k.kernel, k.hash,
                                                      "-O2", {}, stats);
          } catch (const runtime::Error &e) {
            ADD_FAILURE() << where << ": an error although fallback is on: " << e.what();
            continue;
          }
          if (found.outcome != runtime::EnvironmentLookup::Hit) {
            ++(found.outcome == runtime::EnvironmentLookup::Miss ? t.missed : t.at_lookup);
            EXPECT_FALSE(compiled) << where;
            continue;
          }
          if (!compiled) {
            ++t.at_load;
            continue;
          }
          if (found.binary.bytes == k.stored[d.name]) {
            ++t.identical; // the unflipped binary, run above
            continue;
          }
          // Other bytes, the same code (the flip is in names, strings or line numbers): loading
          // made the driver read the whole module; what it runs is the code run above.
          bool same_code = d.code(found.binary.bytes) == d.code(k.stored[d.name]);
          if (same_code) {
            ++t.equal_code;
            continue;
          }
          std::vector<float> got;
          std::string error;
          try {
            got = k.run(d.rt, d.rt.adopt(*k.kernel, std::move(compiled)));
          } catch (const runtime::Error &e) {
            error = e.what();
          }
          if (error.empty() && got == k.expected) {
            ++t.other_code;
            continue;
          }
          ++t.wrong;
          // Allowed only where no check can tell: the flip made the kernel's own SPIR-V another
          // valid kernel with the same interface (it validated and matched its metadata, or it
          // would not have loaded) by changing its code: a constant, or a function's body.
          std::string what = error.empty() ? "wrong results" : "an error at launch: " + error;
          if (d.name != "vulkan" || !k.binary[d.name].contains(p)) {
            ADD_FAILURE() << where << ": " << what;
            continue;
          }
          FlipSite site = spirv_flip_site(k.stored[d.name], p - k.binary[d.name].begin);
          if (site.code)
            wrong_cases.push_back(fmt::format("{} ({}): {}", where, site.text, what));
          else
            ADD_FAILURE() << where << " (" << site.text << ", not code): " << what;
        }
      }
    }
  }
  std::string log = testing::internal::GetCapturedStderr();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << fmt::format("[          ] {} bytes (axpy and reduce_sum for vulkan and interp), "
                           "each flipped, as is and resealed, in {:.1f} s; {} lookups skipped "
                           "(a flip in another entry or another device's binary)\n",
                           bytes.size(), seconds, skipped);
  for (int resealed = 0; resealed < 2; ++resealed) {
    std::cout << fmt::format("[          ] {}: {} rejected at open\n", variant_names[resealed],
                             at_open[resealed]);
    for (const SweepDevice &d : devices) {
      const Tally &t = tally[resealed][d.name];
      std::cout << fmt::format(
          "[          ]   {}: {} lookups: {} missed, {} rejected at lookup, {} rejected at load, "
          "{} hit the stored binary, {} hit equal code, {} hit other code with right results, "
          "{} gave wrong results\n",
          d.name, t.lookups, t.missed, t.at_lookup, t.at_load, t.identical, t.equal_code,
          t.other_code, t.wrong);
      EXPECT_EQ(t.lookups, t.missed + t.at_lookup + t.at_load + t.identical + t.equal_code +
                               t.other_code + t.wrong);
    }
  }
  for (const std::string &c : wrong_cases)
    std::cout << "[          ]   undetectable without a signature: " << c << "\n";

  // Every byte was flipped; as is, the checksums and the zero padding catch every one.
  EXPECT_GT(at_open[0], 0u);
  for (const SweepDevice &d : devices) {
    const Tally &t = tally[0][d.name];
    EXPECT_EQ(t.at_load + t.identical + t.equal_code + t.other_code + t.wrong, 0u) << d.name;
  }
  // Resealed, the checks behind the checksums: the bundle's, and the devices' on first use.
  EXPECT_GT(tally[1]["vulkan"].at_load, 0u);
  EXPECT_GT(tally[1]["interp"].at_load, 0u);
  // Every rejection came from cubecc's own checks, none from the Vulkan validation layer (which
  // an application does not run): without it, the driver sees the same modules.
  EXPECT_EQ(log.find("vulkan validation"), std::string::npos) << log.substr(0, 4000);
}
