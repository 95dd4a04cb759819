//===- env.cpp - `cubecc env`: build, inspect, verify and merge environment bundles -----------===//
#include "env.h"

#include "compile.h"
#include "tool_support.h"

#include "cubecc/autotune/record.h"
#include "cubecc/codegen/backend.h"
#include "cubecc/environments/builder.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/environments/signature.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/verifier.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <tuple>

namespace cubecc::tools {

namespace {

std::string human_bytes(uint64_t bytes) {
  if (bytes < 1024)
    return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024)
    return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

/// Opens a bundle for a command; prints the error and returns null when it does not open. A
/// path that is not a regular file is refused before it is opened (a FIFO would block open()).
std::shared_ptr<const environments::Bundle>
open_bundle(const std::string &path,
            environments::Bundle::OpenMode mode = environments::Bundle::OpenMode::Mapped) {
  if (auto problem = input_problem(path, /*missing_ok=*/true)) {
    std::cerr << fmt::format("cubecc: error: {}: cannot open the environment bundle: {}\n",
                             shown(path), *problem);
    return nullptr;
  }
  try {
    return environments::Bundle::open(path, mode);
  } catch (const runtime::Error &e) {
    report_error(e); // Bundle::open's errors are all ErrorKind::Environment: the caller's 1
    return nullptr;
  }
}

/// Writes a bundle as every output is written (runtime::write_file_atomically); prints why not.
/// `bytes` receives its size.
int write_bundle_file(const std::string &path, const environments::BundleContents &contents,
                      size_t &bytes) {
  std::string serialized;
  try {
    serialized = environments::serialize_bundle(contents);
  } catch (const runtime::Error &e) {
    return report_error(e);
  }
  bytes = serialized.size();
  return write_output("cubecc", path, serialized);
}

/// Says that `output`, made from signed bundles, is not signed: a signature covers the bytes it
/// was made over, and new bytes need a new one.
void note_output_unsigned(const std::string &output) {
  std::cerr << fmt::format("cubecc: note: {} is not signed, although its input was: sign it with "
                           "`cubecc env sign {} --key KEY.key`\n",
                           shown(output), shown(output));
}

/// Whether the targets given are none at all ("--target ''", "--target ,"): a usage error.
bool no_targets(const std::vector<std::string> &lists) {
  for (const std::string &list : lists)
    if (list.find_first_not_of(", ") != std::string::npos)
      return false;
  return true;
}

/// A progress bar on a terminal; nothing otherwise (the summary line follows either way).
class Progress {
public:
  Progress() : tty_(isatty(STDERR_FILENO) != 0) {}
  void operator()(size_t done, size_t total, const std::string &what) {
    if (!tty_)
      return;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
    std::string line = fmt::format("\r[{}{}] {}/{} {}", std::string(filled, '#'),
                                   std::string(kWidth - filled, ' '), done, total, what);
    line.resize(std::max<size_t>(line.size(), last_), ' '); // erase the longer line before
    last_ = line.size();
    std::cerr << line << std::flush;
    if (done == total)
      std::cerr << "\n";
  }

private:
  bool tty_;
  size_t last_ = 0;
};

/// Checks an artifact's contents beyond its checksum, by its target's backend (SPIR-V validates,
/// IR parses and verifies, ELF binaries are ELF for the right machine, PTX names its target).
/// Empty when sound.
std::string check_artifact(const environments::Artifact &a) {
  const codegen::Backend *backend = codegen::find_backend(a.target.target);
  if (!backend)
    return fmt::format("target '{}' is not one this cubecc knows", shown(a.target.target));
  return backend->check_artifact(a.target.target, a.target.format, a.data);
}

} // namespace

int env_build_command(const EnvBuildOptions &options) {
  std::string error;
  // An unknown or unsupported target is bad input (exit 1, as for compile); no target at all is
  // a missing argument (exit 2).
  auto targets = codegen::parse_targets(options.targets, error);
  if (!targets) {
    std::cerr << "cubecc: error: " << shown_message(error) << "\n";
    return no_targets(options.targets) ? kUsageError : kUserError;
  }
  // The output is checked before the build, which can take minutes.
  if (int code = check_output(options.output))
    return code;
  // Each input in a module of its own: kernels are keyed by their hashes, so two inputs may
  // both hold a kernel of the same name (e.g. one kernel per .cir file).
  std::vector<std::unique_ptr<ir::Module>> modules;
  std::vector<ir::Diagnostic> errors;
  std::map<std::string, std::string> configurations;
  std::vector<environments::KernelInput> kernels;
  // A kernel that fails to trace is reported and the others are built: the bundle is written
  // without it and the exit code says something failed.
  LoadOptions load;
  load.configurations = &configurations;
  bool all_loaded = true;
  for (const std::string &input : options.inputs) {
    modules.push_back(std::make_unique<ir::Module>("inputs"));
    all_loaded &= load_inputs({input}, *modules.back(), errors, load);
    // Kernels of a library (or of a DSL source, built into one) are recorded with the library's
    // name and build, so that an application without the library can load them by name.
    const size_t first = kernels.size();
    for (const auto &k : modules.back()->kernels())
      kernels.push_back({k.get(), configurations[k->name()], "", ""});
    if (!input.ends_with(".cir")) {
      std::span<const environments::KernelInput> traced(kernels.begin() + first, kernels.end());
      const std::string library = environments::library_name_of_input(input);
      const std::string build = environments::library_build_of(traced);
      for (size_t k = first; k < kernels.size(); ++k) {
        kernels[k].library = library;
        kernels[k].library_build = build;
      }
    }
  }
  int load_rc = kSuccess;
  if (!all_loaded) {
    if (kernels.empty())
      return report(errors);
    load_rc = report(errors);
    errors.clear();
    std::cerr << fmt::format("cubecc: building the other {}; the bundle leaves out the failed "
                             "ones\n",
                             kernels.size() == 1 ? "kernel"
                                                 : fmt::format("{} kernels", kernels.size()));
  }
  if (kernels.empty()) {
    std::cerr << "cubecc: error: the inputs hold no kernels\n";
    return kUserError;
  }

  auto start = std::chrono::steady_clock::now();
  environments::BuildOptions build;
  build.targets = *targets;
  build.opt_level = options.opt_level;
  build.jobs = options.jobs;
  Progress progress;
  build.progress = std::ref(progress);
  build.skip_unsupported = options.skip_unsupported;
  build.skipped = say_left_out;
  if (!options.shard.empty()) {
    unsigned index = 0, count = 0;
    const std::string &s = options.shard;
    size_t slash = s.find('/');
    auto number = [](std::string_view text, unsigned &out) {
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      return ec == std::errc() && end == text.data() + text.size();
    };
    if (slash == std::string::npos || !number(std::string_view(s).substr(0, slash), index) ||
        !number(std::string_view(s).substr(slash + 1), count) || index < 1 || index > count) {
      std::cerr << fmt::format("cubecc: error: --shard '{}': give I/N, share I of N with 1 <= I "
                               "<= N (e.g. --shard 2/4)\n",
                               shown(s));
      return kUserError;
    }
    build.shard_index = index - 1;
    build.shard_count = count;
  }
  environments::Metadata metadata;
  if (!provenance_metadata(options.provenance, metadata))
    return kUserError;
  auto contents = environments::build_entries(kernels, build, errors);
  if (!contents)
    return report(errors);
  metadata.targets = contents->metadata.targets;
  metadata.toolkits = contents->metadata.toolkits;
  contents->metadata = std::move(metadata);
  size_t bytes = 0;
  if (int code = write_bundle_file(options.output, *contents, bytes))
    return code;
  size_t artifacts = 0;
  for (const auto &e : contents->entries)
    artifacts += e.artifacts.size();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << fmt::format("cubecc: {}: {}{}, {} for {} in {:.1f} s ({})\n", shown(options.output),
                           options.shard.empty() ? "" : "shard " + options.shard + ": ",
                           counted(contents->entries.size(), "kernel"),
                           counted(artifacts, "binary", "binaries"), fmt::join(*targets, ", "),
                           seconds, human_bytes(bytes));
  return load_rc;
}

bool provenance_metadata(const ProvenanceOptions &options, environments::Metadata &out) {
  environments::Provenance provenance;
  provenance.record_host = options.record_host;
  if (options.created_at == "now") {
    provenance.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  } else if (!options.created_at.empty()) {
    provenance.created_unix = environments::parse_unix_seconds(options.created_at);
    if (!provenance.created_unix) {
      std::cerr << fmt::format("cubecc: error: --created-at '{}': give seconds since 1970, up "
                               "to the end of year 9999 (e.g. git log -1 --format=%ct), or "
                               "'now'\n",
                               shown(options.created_at));
      return false;
    }
  }
  try {
    out = environments::current_metadata(
        options.record_command ? options.command_line : options.tool, provenance);
  } catch (const runtime::Error &e) {
    report_error(e);
    return false;
  }
  return true;
}

int env_inspect_command(const std::string &path, bool json) {
  auto bundle = open_bundle(path);
  if (!bundle)
    return kUserError;
  const environments::Metadata &m = bundle->metadata();
  std::vector<std::optional<environments::Entry>> entries;
  std::vector<std::string> damaged(bundle->num_entries());
  for (size_t i = 0; i < bundle->num_entries(); ++i)
    entries.push_back(bundle->read_entry(i, damaged[i]));
  std::vector<environments::TuningEntry> tuning = bundle->tuning_records();
  std::vector<std::string> damaged_records(tuning.size());
  std::vector<std::optional<autotune::TuningRecord>> records;
  for (size_t i = 0; i < tuning.size(); ++i)
    records.push_back(autotune::parse_record(tuning[i].record, damaged_records[i]));
  // Everything that can be listed is; damage makes the exit status 1 (verify says more).
  auto finish = [&] {
    std::vector<std::string> damage;
    if (auto n = std::count(entries.begin(), entries.end(), std::nullopt))
      damage.push_back(fmt::format("{} damaged {}", n, n == 1 ? "entry" : "entries"));
    if (auto n = std::count(records.begin(), records.end(), std::nullopt))
      damage.push_back(fmt::format("{} damaged tuning record{}", n, n == 1 ? "" : "s"));
    if (damage.empty())
      return kSuccess;
    std::fflush(stdout); // the listing comes before the error
    std::cerr << fmt::format("cubecc: error: {}: {}\n", path, fmt::join(damage, ", "));
    return kUserError;
  };
  // A time no cubecc records (negative, or after year 9999) is a damaged or foreign index:
  // shown as a number, never given to gmtime.
  const bool dated = m.created_unix > 0 && m.created_unix <= environments::kLatestUnixSeconds;
  std::string created =
      dated ? fmt::format("{:%Y-%m-%d %H:%M:%S} UTC",
                          fmt::gmtime(static_cast<std::time_t>(m.created_unix)))
      : m.created_unix == 0
          ? std::string("an unrecorded time")
          : fmt::format("an invalid time ({} seconds since 1970)", m.created_unix);

  if (json) {
    nlohmann::json out;
    out["file"] = path;
    out["bytes"] = bundle->file_bytes();
    out["format_version"] = bundle->format_version();
    out["cubecc_version"] = m.cubecc_version;
    out["created"] = {{"unix", m.created_unix},
                      {"utc", dated ? nlohmann::json(created) : nlohmann::json()},
                      {"host", m.created_host},
                      {"by", m.created_by}};
    out["targets"] = m.targets;
    out["signed_by"] =
        bundle->signature() ? nlohmann::json(bundle->signature()->signer.hex()) : nlohmann::json();
    out["toolkits"] = nlohmann::json::object();
    for (const auto &[name, version] : m.toolkits)
      out["toolkits"][name] = version;
    out["kernels"] = nlohmann::json::array();
    for (size_t i = 0; i < entries.size(); ++i) {
      nlohmann::json k;
      k["index"] = i;
      k["bytes"] = bundle->entry_bytes(i);
      if (!entries[i]) {
        k["damaged"] = damaged[i];
        out["kernels"].push_back(k);
        continue;
      }
      const environments::Entry &e = *entries[i];
      k["name"] = e.name;
      k["configuration"] = e.configuration;
      k["hash"] = e.hash.hex();
      k["options"] = e.options;
      k["library"] = e.library;
      k["library_build"] = e.library_build;
      k["parameters"] = e.parameter_names;
      k["artifacts"] = nlohmann::json::array();
      for (const environments::Artifact &a : e.artifacts) {
        const auto &abi = a.abi;
        // SPIR-V: what a device must have to take it (docs/environments.md)
        auto relies = codegen::TargetFeatures::from_fingerprint(a.target.features);
        k["artifacts"].push_back({{"target", a.target.target},
                                  {"format", a.target.format},
                                  {"bytes", a.data.size()},
                                  {"toolkit", a.target.toolkit},
                                  {"features", a.target.features},
                                  {"relies_on", relies ? relies->needs() : ""},
                                  {"entry", a.entry},
                                  {"workgroup_size", abi.workgroup_size},
                                  {"shared_bytes", abi.shared_bytes},
                                  {"buffers", abi.num_buffers},
                                  {"param_block_bytes", abi.param_block_bytes}});
      }
      out["kernels"].push_back(k);
    }
    out["tuning"] = nlohmann::json::array();
    for (size_t i = 0; i < tuning.size(); ++i) {
      const auto &t = tuning[i];
      // A record nested deeper than any tuning record is shown as its text: copying and
      // printing a parsed value recurses once per level (a hostile bundle overflowed the stack).
      bool too_deep = false;
      nlohmann::json record = nlohmann::json::parse(
          t.record,
          [&](int depth, nlohmann::json::parse_event_t, nlohmann::json &) {
            too_deep = too_deep || depth > 64;
            return !too_deep;
          },
          false);
      if (too_deep)
        record = nlohmann::json::value_t::discarded;
      out["tuning"].push_back(
          {{"key", t.key}, {"record", record.is_discarded() ? nlohmann::json(t.record) : record}});
      if (!records[i])
        out["tuning"].back()["damaged"] = damaged_records[i];
    }
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return finish();
  }

  print_out("{}: environment bundle, format {}, {}\n", path, bundle->format_version(),
            human_bytes(bundle->file_bytes()));
  print_out("built by cubecc {} on {} at {}{}\n", m.cubecc_version,
            m.created_host.empty() ? "an unrecorded host" : m.created_host, created,
            m.created_by.empty() ? "" : fmt::format(" ({})", m.created_by));
  print_out("targets: {}\n",
            m.targets.empty() ? "-" : fmt::format("{}", fmt::join(m.targets, ", ")));
  std::vector<std::string> toolkits;
  for (const auto &[name, version] : m.toolkits)
    toolkits.push_back(name + " " + version);
  print_out("toolkits: {}\n",
            toolkits.empty() ? "-" : fmt::format("{}", fmt::join(toolkits, "; ")));
  print_out("signature: {}\n\n",
            bundle->signature()
                ? fmt::format("by key {} (not checked here: `cubecc env verify --key`)",
                              bundle->signature()->signer.id())
                : std::string("none"));
  // The library names what Runtime::kernel_from_environment (and Python's) takes with the
  // kernel's name and configuration; columns as wide as their widest entry.
  size_t library_width = 7, kernel_width = 6, configuration_width = 13;
  for (const auto &e : entries)
    if (e) {
      library_width = std::max(library_width, e->library.size());
      kernel_width = std::max(kernel_width, e->name.size());
      configuration_width = std::max(configuration_width, e->configuration.size());
    }
  auto row = [&](std::string_view library, std::string_view kernel, std::string_view configuration,
                 std::string_view opt, std::string_view hash, std::string_view binaries) {
    print_out("{:<{}}  {:<{}}  {:<{}}  {:<4} {:<12} {}\n", library, library_width, kernel,
              kernel_width, configuration, configuration_width, opt, hash, binaries);
  };
  row("library", "kernel", "configuration", "opt", "hash", "binaries");
  // By library and name, for reading (the index is by key).
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a] && entries[b] &&
           std::tie(entries[a]->library, entries[a]->name) <
               std::tie(entries[b]->library, entries[b]->name);
  });
  for (size_t i : order) {
    if (!entries[i]) {
      print_out("entry {}: DAMAGED: {}\n", i, damaged[i]);
      continue;
    }
    const environments::Entry &e = *entries[i];
    std::vector<std::string> binaries;
    for (const environments::Artifact &a : e.artifacts)
      binaries.push_back(
          fmt::format("{} {} {}", a.target.target, a.target.format, human_bytes(a.data.size())));
    row(e.library.empty() ? "-" : e.library, e.name,
        e.configuration.empty() ? "-" : e.configuration, e.options, e.hash.hex().substr(0, 12),
        fmt::format("{}", fmt::join(binaries, ", ")));
  }
  print_out("\n{}; {}\n", counted(entries.size(), "kernel"),
            counted(tuning.size(), "tuning record"));
  for (size_t i = 0; i < tuning.size(); ++i) {
    const std::optional<autotune::TuningRecord> &r = records[i];
    if (!r) {
      print_out("  {}: DAMAGED: {}\n", tuning[i].key, damaged_records[i]);
      continue;
    }
    std::vector<std::string> timings;
    for (const autotune::VariantTiming &v : r->timings)
      timings.push_back(v.invalid ? v.configuration + " invalid"
                        : v.eliminated
                            ? v.configuration + " eliminated"
                            : fmt::format("{} {:.1f} us", v.configuration, v.median_ns / 1e3));
    print_out("  {} [{}] -> {}  ({})\n    on {}\n", r->tunable, r->bucket, r->configuration,
              fmt::join(timings, "; "), r->device);
  }
  return finish();
}

int env_verify_command(const std::string &path, bool json, const std::vector<std::string> &keys) {
  std::vector<environments::PublicKey> trusted;
  try {
    for (const std::string &key : keys)
      trusted.push_back(environments::trusted_key(key));
  } catch (const runtime::Error &e) {
    return report_error(e, "--key");
  }
  // Read whole when a signature is checked: what is verified is what the checks below read.
  auto bundle = open_bundle(path, keys.empty() ? environments::Bundle::OpenMode::Mapped
                                               : environments::Bundle::OpenMode::InMemory);
  if (!bundle)
    return kUserError;
  // Each problem: where (entry and kernel, or tuning record) and what.
  nlohmann::json problems = nlohmann::json::array();
  auto problem = [&](nlohmann::json where, const std::string &what) {
    where["message"] = what;
    problems.push_back(std::move(where));
  };
  size_t artifacts = 0;
  for (size_t i = 0; i < bundle->num_entries(); ++i) {
    std::string error;
    std::optional<environments::Entry> entry = bundle->read_entry(i, error);
    if (!entry) {
      problem({{"entry", i}}, error);
      continue;
    }
    for (const environments::Artifact &a : entry->artifacts) {
      ++artifacts;
      if (std::string why = check_artifact(a); !why.empty())
        problem({{"entry", i},
                 {"kernel", entry->name},
                 {"target", a.target.target},
                 {"format", a.target.format}},
                why);
    }
  }
  for (const auto &t : bundle->tuning_records()) {
    std::string error;
    std::optional<autotune::TuningRecord> r = autotune::parse_record(t.record, error);
    if (!r || autotune::record_key(*r) != t.key)
      problem({{"tuning_record", t.key}}, r ? "stored under another record's key" : error);
  }
  // The signature: by one of the keys given; without keys, a signature there is checked against
  // its own key (intact or not), which says nothing about who signed.
  const auto &signature = bundle->signature();
  nlohmann::json signature_json = {{"signed", signature.has_value()}};
  std::string signature_line; // nothing for an unsigned bundle, as before signatures
  if (signature || !trusted.empty()) {
    std::vector<environments::PublicKey> against = trusted;
    if (against.empty())
      against.push_back(signature->signer);
    std::string why = bundle->signature_refusal(against);
    if (!why.empty())
      problem({{"signature", signature ? signature->signer.hex() : ""}}, why);
    if (signature) {
      signature_json["key"] = signature->signer.hex();
      signature_json["valid"] = bundle->signature_refusal(std::span(&signature->signer, 1)).empty();
      signature_json["trusted"] = trusted.empty() ? nlohmann::json() : nlohmann::json(why.empty());
      signature_line = trusted.empty()
                           ? fmt::format("; signed by key {} (the signature matches; pass --key "
                                         "to check that the key is one you trust)",
                                         signature->signer.id())
                           : fmt::format("; signed by trusted key {}", signature->signer.id());
    }
  }
  if (json) {
    nlohmann::json out = {{"bundle", path},
                          {"ok", problems.empty()},
                          {"kernels", bundle->num_entries()},
                          {"binaries", artifacts},
                          {"tuning_records", bundle->num_tuning_records()},
                          {"signature", signature_json},
                          {"problems", problems}};
    print_out("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return problems.empty() ? kSuccess : kUserError;
  }
  for (const nlohmann::json &p : problems) {
    std::string where;
    if (p.contains("tuning_record"))
      where = fmt::format("tuning record '{}'", p["tuning_record"].get<std::string>());
    else if (p.contains("signature"))
      where = "signature";
    else if (p.contains("kernel"))
      where = fmt::format("entry {}, kernel '{}', {} {}", p["entry"].get<size_t>(),
                          p["kernel"].get<std::string>(), p["target"].get<std::string>(),
                          p["format"].get<std::string>());
    std::cerr << fmt::format("{}: {}{}\n", path, where.empty() ? "" : where + ": ",
                             p["message"].get<std::string>());
  }
  if (!problems.empty()) {
    std::cerr << fmt::format("{}: {} problem{} found\n", path, problems.size(),
                             problems.size() == 1 ? "" : "s");
    return kUserError;
  }
  print_out("{}: ok: {}, {}, {} verified{}\n", path, counted(bundle->num_entries(), "kernel"),
            counted(artifacts, "binary", "binaries"),
            counted(bundle->num_tuning_records(), "tuning record"), signature_line);
  return kSuccess;
}

//===- env keygen and env sign ---------------------------------------------------------------===//

namespace {

/// Creates `path` (which must not exist) with `mode` and writes `text` to it, synced; prints why
/// not and returns false.
bool create_new_file(const std::string &path, std::string_view text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  auto fail = [&](const char *step) {
    std::cerr << fmt::format("{}: error: cannot {} the key file: {}\n", shown(path), step,
                             std::strerror(errno));
    if (fd >= 0) {
      ::close(fd);
      ::unlink(path.c_str());
    }
    return false;
  };
  if (fd < 0)
    return fail("create");
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail("write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0)
    return fail("sync");
  if (::close(fd) != 0) {
    fd = -1;
    return fail("close");
  }
  return true;
}

} // namespace

int env_keygen_command(const std::string &name) {
  const std::string secret_path = name + ".key", public_path = name + ".pub";
  for (const std::string &path : {secret_path, public_path}) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      std::cerr << fmt::format("{}: error: it exists, and keygen never replaces a key: choose "
                               "another name, or remove the old key first\n",
                               shown(path));
      return kUserError;
    }
  }
  environments::SecretKey key = environments::generate_secret_key();
  environments::PublicKey public_key = key.public_key();
  if (!create_new_file(secret_path, environments::secret_key_file_text(key), 0600))
    return kUserError;
  if (!create_new_file(public_path, environments::public_key_file_text(public_key), 0644)) {
    ::unlink(secret_path.c_str()); // a secret key without its public half is of no use
    return kUserError;
  }
  std::cerr << fmt::format("cubecc: wrote {} (the secret key: keep it where bundles are signed) "
                           "and {} (public key {}: runtimes trust it with "
                           "CUBECC_TRUSTED_KEYS={})\n",
                           shown(secret_path), shown(public_path), public_key.id(),
                           shown(public_path));
  return kSuccess;
}

int env_sign_command(const std::string &path, const std::string &key_path,
                     const std::string &output) {
  const std::string &out = output.empty() ? path : output;
  if (int code = check_output(out))
    return code;
  environments::SecretKey key;
  try {
    key = environments::read_secret_key(key_path);
  } catch (const runtime::Error &e) {
    return report_error(e);
  }
  // Read whole, checked, and signed from that copy: what is signed is what was checked.
  auto bundle = open_bundle(path, environments::Bundle::OpenMode::InMemory);
  if (!bundle)
    return kUserError;
  for (size_t i = 0; i < bundle->num_entries(); ++i) {
    std::string error;
    if (!bundle->read_entry(i, error)) {
      std::cerr << fmt::format("cubecc: error: {}: {}: a damaged bundle is not signed\n",
                               shown(path), error);
      return kUserError;
    }
  }
  for (const auto &t : bundle->tuning_records()) {
    std::string error;
    if (!autotune::parse_record(t.record, error)) {
      std::cerr << fmt::format("cubecc: error: {}: tuning record '{}': {}: a damaged bundle is "
                               "not signed\n",
                               shown(path), t.key, error);
      return kUserError;
    }
  }
  std::span<const uint8_t> bytes = bundle->bytes();
  std::string signed_bundle = environments::sign_bundle(
      std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()), key);
  if (int code = write_output("cubecc", out, signed_bundle))
    return code;
  const environments::PublicKey signer = key.public_key();
  std::string replaced;
  if (const auto &old = bundle->signature())
    replaced = old->signer == signer
                   ? std::string(" (replacing its signature by the same key)")
                   : fmt::format(" (replacing its signature by key {})", old->signer.id());
  std::cerr << fmt::format("cubecc: {}: signed with key {}{}\n", shown(out), signer.id(), replaced);
  return kSuccess;
}

int env_merge_command(const std::vector<std::string> &inputs, const std::string &output,
                      const ProvenanceOptions &provenance) {
  if (int code = check_output(output))
    return code;
  environments::Metadata metadata;
  if (!provenance_metadata(provenance, metadata))
    return kUserError;
  environments::BundleContents merged;
  std::string version;
  // A merge of bundles made alike (the shards of one build) records how they were made, so that
  // it is that build byte for byte; of bundles made otherwise, or when asked, its own making.
  std::optional<environments::Metadata> common;
  bool alike = true, any_signed = false;
  for (const std::string &input : inputs) {
    auto bundle = open_bundle(input);
    if (!bundle)
      return kUserError;
    any_signed = any_signed || bundle->signature().has_value();
    if (!version.empty() && bundle->metadata().cubecc_version != version) {
      std::cerr << fmt::format("cubecc: error: {} was built by cubecc {}, {} by cubecc {}: "
                               "bundles of different versions cannot be merged\n",
                               shown(inputs.front()), version, shown(input),
                               bundle->metadata().cubecc_version);
      return kUserError;
    }
    version = bundle->metadata().cubecc_version;
    const environments::Metadata &m = bundle->metadata();
    if (!common)
      common = m;
    else if (m.created_by != common->created_by || m.created_unix != common->created_unix ||
             m.created_host != common->created_host)
      alike = false;
    for (const auto &t : bundle->tuning_records()) {
      std::string error;
      if (!autotune::parse_record(t.record, error)) {
        std::cerr << fmt::format("cubecc: error: {}: tuning record '{}': {}\n", input, t.key,
                                 error);
        return kUserError;
      }
    }
    try {
      for (const std::string &note : environments::merge_contents(merged, bundle->contents()))
        std::cerr << fmt::format("cubecc: note: {}: {}\n", input, note);
    } catch (const runtime::Error &e) {
      return report_error(e);
    }
  }
  metadata.cubecc_version = version;
  if (alike && common && !provenance.asked()) {
    metadata.created_by = common->created_by;
    metadata.created_unix = common->created_unix;
    metadata.created_host = common->created_host;
  }
  metadata.targets = std::move(merged.metadata.targets);
  metadata.toolkits = std::move(merged.metadata.toolkits);
  merged.metadata = std::move(metadata);
  size_t bytes = 0;
  if (int code = write_bundle_file(output, merged, bytes))
    return code;
  std::cerr << fmt::format(
      "cubecc: {}: {}, {} from {}\n", shown(output), counted(merged.entries.size(), "kernel"),
      counted(merged.tuning.size(), "tuning record"), counted(inputs.size(), "bundle"));
  if (any_signed)
    note_output_unsigned(output);
  return kSuccess;
}

//===- env diff and env prune ----------------------------------------------------------------===//

namespace {

/// A bundle's whole contents, or nothing after printing why (a damaged entry included);
/// `signer`, when given, receives the key its signature names, if it has one.
std::optional<environments::BundleContents>
read_contents(const std::string &path, std::optional<environments::PublicKey> *signer = nullptr) {
  auto bundle = open_bundle(path);
  if (!bundle)
    return std::nullopt;
  if (signer && bundle->signature())
    *signer = bundle->signature()->signer;
  try {
    return bundle->contents();
  } catch (const runtime::Error &e) {
    report_error(e);
    return std::nullopt;
  }
}

std::string kernel_label(const environments::Entry &e) {
  return fmt::format("{}{} {} ({})", e.name, e.configuration.empty() ? "" : " " + e.configuration,
                     e.options, e.hash.hex().substr(0, 12));
}

std::string binary_label(const environments::Artifact &a) {
  return fmt::format("{} {}{}", a.target.target, a.target.format,
                     a.target.toolkit.empty() ? "" : " (" + a.target.toolkit + ")");
}

} // namespace

int env_diff_command(const std::string &a_path, const std::string &b_path, bool json) {
  std::optional<environments::PublicKey> signer_a, signer_b;
  auto a = read_contents(a_path, &signer_a);
  if (!a)
    return kUserError;
  auto b = read_contents(b_path, &signer_b);
  if (!b)
    return kUserError;
  // Entries by key (hash and options); binaries by kind (target, format, features, toolkit).
  auto key = [](const environments::Entry &e) { return e.hash.hex() + " " + e.options; };
  auto kind = [](const environments::Artifact &x) {
    return fmt::format("{}|{}|{}|{}", x.target.target, x.target.format, x.target.features,
                       x.target.toolkit);
  };
  std::map<std::string, const environments::Entry *> in_b;
  for (const auto &e : b->entries)
    in_b[key(e)] = &e;
  nlohmann::json out = {{"a", a_path}, {"b", b_path}};
  std::vector<std::string> lines;
  auto note = [&](const char *field, nlohmann::json item, std::string line) {
    out[field].push_back(std::move(item));
    lines.push_back(std::move(line));
  };
  for (const char *field :
       {"kernels_only_in_a", "kernels_only_in_b", "binaries_only_in_a", "binaries_only_in_b",
        "binaries_changed", "tuning_only_in_a", "tuning_only_in_b", "tuning_changed"})
    out[field] = nlohmann::json::array();
  for (const auto &e : a->entries) {
    auto found = in_b.find(key(e));
    if (found == in_b.end()) {
      note("kernels_only_in_a", {{"name", e.name}, {"hash", e.hash.hex()}, {"options", e.options}},
           "- kernel " + kernel_label(e));
      continue;
    }
    const environments::Entry &other = *found->second;
    in_b.erase(found);
    std::map<std::string, const environments::Artifact *> theirs;
    for (const auto &x : other.artifacts)
      theirs[kind(x)] = &x;
    for (const auto &x : e.artifacts) {
      auto t = theirs.find(kind(x));
      nlohmann::json item = {{"kernel", e.name},
                             {"target", x.target.target},
                             {"format", x.target.format},
                             {"toolkit", x.target.toolkit}};
      if (t == theirs.end()) {
        note("binaries_only_in_a", item,
             fmt::format("- {}: {} ({} bytes)", kernel_label(e), binary_label(x), x.data.size()));
        continue;
      }
      if (t->second->data != x.data || t->second->entry != x.entry) {
        item["bytes_a"] = x.data.size();
        item["bytes_b"] = t->second->data.size();
        note("binaries_changed", item,
             fmt::format("~ {}: {} ({} -> {} bytes)", kernel_label(e), binary_label(x),
                         x.data.size(), t->second->data.size()));
      }
      theirs.erase(t);
    }
    for (const auto &[k, x] : theirs)
      note("binaries_only_in_b",
           {{"kernel", e.name},
            {"target", x->target.target},
            {"format", x->target.format},
            {"toolkit", x->target.toolkit}},
           fmt::format("+ {}: {} ({} bytes)", kernel_label(e), binary_label(*x), x->data.size()));
  }
  for (const auto &e : b->entries)
    if (in_b.contains(key(e)))
      note("kernels_only_in_b", {{"name", e.name}, {"hash", e.hash.hex()}, {"options", e.options}},
           "+ kernel " + kernel_label(e));
  std::map<std::string, std::string> records_b;
  for (const auto &t : b->tuning)
    records_b[t.key] = t.record;
  for (const auto &t : a->tuning) {
    auto found = records_b.find(t.key);
    if (found == records_b.end())
      note("tuning_only_in_a", t.key, "- tuning " + t.key);
    else if (found->second != t.record)
      note("tuning_changed", t.key, "~ tuning " + t.key);
    if (found != records_b.end())
      records_b.erase(found);
  }
  for (const auto &[k, record] : records_b)
    note("tuning_only_in_b", k, "+ tuning " + k);
  out["identical_contents"] = lines.empty();
  // Signatures are not contents (a signed bundle and its unsigned self hold the same), but which
  // key signed each is said when they differ.
  auto signer_text = [](const std::optional<environments::PublicKey> &k) {
    return k ? "signed by key " + k->id() : std::string("not signed");
  };
  out["signed_by_a"] = signer_a ? nlohmann::json(signer_a->hex()) : nlohmann::json();
  out["signed_by_b"] = signer_b ? nlohmann::json(signer_b->hex()) : nlohmann::json();
  if (json) {
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kSuccess;
  }
  for (const std::string &line : lines)
    print_out("{}\n", line);
  if (signer_a != signer_b)
    print_out("signatures differ: {} is {}, {} is {}\n", a_path, signer_text(signer_a), b_path,
              signer_text(signer_b));
  print_out("{} vs {}: {}\n", a_path, b_path,
            lines.empty()
                ? std::string("the same kernels, binaries and tuning records")
                : fmt::format("{} difference{}", lines.size(), lines.size() == 1 ? "" : "s"));
  return kSuccess;
}

int env_prune_command(const EnvPruneOptions &options) {
  if (int code = check_output(options.output))
    return code;
  std::optional<environments::PublicKey> signer;
  auto contents = read_contents(options.input, &signer);
  if (!contents)
    return kUserError;
  auto listed = [](const std::vector<std::string> &list, const std::string &name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  // A name that matches nothing is a mistake worth stopping for (a typo would prune nothing).
  for (const std::string &t : options.drop_targets)
    if (!listed(contents->metadata.targets, t)) {
      std::cerr << fmt::format("cubecc: error: {}: no target '{}' (its targets: {})\n",
                               shown(options.input), shown(t),
                               fmt::join(contents->metadata.targets, ", "));
      return kUserError;
    }
  for (const std::string &k : options.drop_kernels)
    if (std::none_of(contents->entries.begin(), contents->entries.end(),
                     [&](const environments::Entry &e) { return e.name == k; })) {
      std::cerr << fmt::format("cubecc: error: {}: no kernel named '{}'\n", shown(options.input),
                               shown(k));
      return kUserError;
    }
  // A target's binaries: those its backend made for it (a CUDA target's PTX is named after its
  // compute capability: cuda:sm_80 owns cuda:compute_80).
  auto owned_by = [&](const environments::Artifact &x) {
    for (const std::string &t : options.drop_targets) {
      if (x.target.target == t)
        return true;
      if (t.starts_with("cuda:sm_") && x.target.target == "cuda:compute_" + t.substr(8))
        return true;
    }
    return false;
  };
  size_t kernels = 0, binaries = 0;
  std::vector<environments::Entry> kept;
  for (environments::Entry &e : contents->entries) {
    if (listed(options.drop_kernels, e.name)) {
      ++kernels;
      continue;
    }
    size_t before = e.artifacts.size();
    std::erase_if(e.artifacts, owned_by);
    binaries += before - e.artifacts.size();
    if (!e.artifacts.empty())
      kept.push_back(std::move(e));
    else
      ++kernels;
  }
  contents->entries = std::move(kept);
  std::erase_if(contents->metadata.targets,
                [&](const std::string &t) { return listed(options.drop_targets, t); });
  // The toolkits that made a binary still in the bundle.
  std::erase_if(contents->metadata.toolkits, [&](const auto &toolkit) {
    return std::none_of(contents->entries.begin(), contents->entries.end(), [&](const auto &e) {
      return std::any_of(e.artifacts.begin(), e.artifacts.end(), [&](const auto &x) {
        return x.target.toolkit.starts_with(toolkit.first);
      });
    });
  });
  size_t bytes = 0;
  if (int code = write_bundle_file(options.output, *contents, bytes))
    return code;
  std::cerr << fmt::format("cubecc: {}: {} left ({} dropped, {} dropped), targets {} ({})\n",
                           shown(options.output), counted(contents->entries.size(), "kernel"),
                           kernels, counted(binaries, "binary", "binaries"),
                           contents->metadata.targets.empty()
                               ? std::string("-")
                               : fmt::format("{}", fmt::join(contents->metadata.targets, ", ")),
                           human_bytes(bytes));
  if (signer)
    note_output_unsigned(options.output);
  return kSuccess;
}

} // namespace cubecc::tools
