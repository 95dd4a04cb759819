//===- bundle_fuzzer.cpp - libFuzzer target for the environment bundle reader -----------------===//
//
// Any input (or, behind a first byte that is not the magic's, any input with its checksums
// recomputed): opening, decoding every entry, looking kernels and tuning records up and merging
// must not crash, hang or leak; a damaged bundle is an Error at open or a rejected entry. What
// opens must also keep the reader's promises: every tuning record listed is found by its key, a
// damaged entry says why, a hit names its binary.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/target.h"
#include "cubecc/environments/bundle.h"

#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

using namespace cubecc;

namespace {

[[noreturn]] void broken(const char *promise) {
  std::fprintf(stderr, "bundle reader broke its promise: %s\n", promise);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Mutations almost never keep the checksums right. An input that does not start like a bundle
  // (its first byte is not the magic's) is its first byte then a bundle whose checksums are
  // recomputed, so that the checks behind them are fuzzed too.
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (!bytes.empty() && bytes[0] != environments::kMagic[0])
    bytes = environments::reseal_for_testing(bytes.substr(1));
  std::shared_ptr<const environments::Bundle> bundle;
  try {
    bundle = environments::Bundle::from_bytes(bytes, "fuzz.cubeenv");
  } catch (const runtime::Error &) {
    return 0;
  }
  // A signature is checked against its own key (the bytes hashed are the bundle's).
  if (const auto &signature = bundle->signature()) {
    if (signature->signed_bytes != bundle->bundle_bytes())
      broken("a signature trailer signs the bundle's bytes");
    bundle->signature_refusal(std::vector{signature->signer});
  }
  for (const environments::TuningEntry &t : bundle->tuning_records())
    if (bundle->find_tuning(t.key) != t.record)
      broken("a listed tuning record is found by its key");
  bundle->find_tuning("");
  bundle->find_named_kernel("examples", "axpy", "", "-O2", {});
  for (size_t i = 0; i < bundle->num_entries(); ++i) {
    std::string error;
    std::optional<environments::Entry> entry = bundle->read_entry(i, error);
    if (!entry) {
      if (error.empty())
        broken("a damaged entry says why");
      continue;
    }
    std::vector<runtime::BinaryTarget> targets;
    for (const environments::Artifact &a : entry->artifacts)
      targets.push_back(a.target);
    runtime::EnvironmentLookup found = bundle->find_kernel(entry->hash, entry->options, targets);
    if (found.outcome == runtime::EnvironmentLookup::Hit && found.binary.target.format.empty())
      broken("a hit names its binary's format");
    // By name (the index's name table, then a scan): a sound entry is always found.
    if (!entry->library.empty() &&
        !bundle
             ->find_named_kernel(entry->library, entry->name, entry->configuration, entry->options,
                                 targets)
             .entry_found)
      broken("a sound entry is found by its name");
    // A Vulkan device compares what the SPIR-V relies on with its own features (fingerprints
    // read back from the file): a hit's record reads back and asks nothing the device lacks.
    static const codegen::TargetFeatures device = codegen::TargetFeatures::vulkan_baseline();
    runtime::BinaryTarget vulkan{"vulkan", "spirv", device.fingerprint(), ""};
    found = bundle->find_kernel(entry->hash, entry->options, std::span(&vulkan, 1));
    if (found.outcome == runtime::EnvironmentLookup::Hit) {
      auto relies = codegen::TargetFeatures::from_fingerprint(found.binary.target.features);
      if (!relies || !relies->unmet_on(device).empty())
        broken("SPIR-V is taken only where the device has what it relies on");
    }
  }
  try {
    environments::BundleContents contents = bundle->contents();
    environments::merge_contents(contents, bundle->contents());
  } catch (const runtime::Error &) {
  }
  return 0;
}
