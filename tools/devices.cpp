//===- devices.cpp - `cubecc devices`: the backends built in and the devices present ----------===//
#include "devices.h"

#include "cubecc/runtime/device.h"
#include "cubecc/runtime/memory_pool.h"

#include "tool_support.h"

#include <fmt/format.h>

#include <limits>
#include <string>
#include <vector>

namespace cubecc::tools {

namespace {

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += {'\\', static_cast<char>(c)};
    else if (c < 0x20)
      out += fmt::format("\\u{:04x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

/// The feature flags of a device, by the names `cubecc devices` prints.
std::vector<std::pair<const char *, bool>> feature_flags(const codegen::TargetFeatures &f) {
  return {{"int8", f.int8},
          {"int16", f.int16},
          {"int64", f.int64},
          {"float16", f.float16},
          {"bfloat16", f.bfloat16},
          {"float64", f.float64},
          {"int64_atomics", f.int64_atomics},
          {"float32_atomic_add", f.float32_atomic_add},
          {"float32_atomics", f.float32_atomics},
          {"float32_atomic_min_max", f.float32_atomic_min_max},
          {"float64_atomic_add", f.float64_atomic_add},
          {"narrow_atomics", f.narrow_atomics},
          {"subgroup_arithmetic", f.subgroup_arithmetic},
          {"subgroup_shuffle", f.subgroup_shuffle},
          {"subgroup_ballot", f.subgroup_ballot}};
}

std::string entry_json(const runtime::DeviceEntry &e) {
  std::string out = fmt::format(R"({{"backend": {}, "built": {}, "available": {})",
                                json_string(e.backend), e.built, e.available);
  if (!e.info) {
    return out + fmt::format(R"(, "reason": {}}})", json_string(e.detail));
  }
  const runtime::DeviceInfo &info = *e.info;
  const codegen::TargetFeatures &f = info.features;
  out += fmt::format(
      R"(, "class": {}, "name": {}, "driver": {}, "vendor": {}, "arch": {}, "subgroup_size": {}, )"
      R"("max_buffer_bytes": {}, "timestamp_period_ns": {}, "features": {{)",
      json_string(runtime::device_class_name(info.device_class)), json_string(info.name),
      json_string(info.driver), json_string(info.vendor), json_string(info.arch),
      info.subgroup_size, info.max_buffer_bytes, info.timestamp_period_ns);
  for (const auto &[name, on] : feature_flags(f))
    out += fmt::format(R"("{}": {}, )", name, on);
  out += fmt::format(R"("max_shared_bytes": {}, "max_param_block_bytes": {}, )"
                     R"("max_workgroup_invocations": {}, "max_workgroup_size": [{}, {}, {}]}}}})",
                     f.max_shared_bytes, f.max_param_block_bytes, f.max_workgroup_invocations,
                     f.max_workgroup_size[0], f.max_workgroup_size[1], f.max_workgroup_size[2]);
  return out;
}

/// The memory pool a Runtime opens with: its policy and limits (a fresh process has allocated
/// nothing, so there are no statistics to show). A limit that is off is null.
std::string pool_json(const runtime::PoolOptions &pool) {
  auto limit = [](uint64_t value, uint64_t off) {
    return value == off ? std::string("null") : fmt::format("{}", value);
  };
  return fmt::format(R"({{"policy": "{}", "max_cached_bytes": {}, "idle_release_allocations": {}, )"
                     R"("max_reserved_ratio": {}, "exact_class_after": {}}})",
                     runtime::pool_policy_name(pool.policy),
                     limit(pool.max_cached_bytes, std::numeric_limits<uint64_t>::max()),
                     limit(pool.idle_release_allocations, 0),
                     pool.max_reserved_ratio > 0 ? fmt::format("{}", pool.max_reserved_ratio)
                                                 : std::string("null"),
                     pool.exact_class_after);
}

} // namespace

int devices_command(bool json) {
  std::vector<runtime::DeviceEntry> entries = runtime::list_devices();
  if (json) {
    std::string out = "{\"devices\": [";
    for (size_t i = 0; i < entries.size(); ++i)
      out += (i ? ",\n  " : "\n  ") + entry_json(entries[i]);
    print_out("{}\n],\n\"pool\": {}}}\n", out, pool_json(runtime::PoolOptions{}));
    return kSuccess;
  }
  for (const runtime::DeviceEntry &e : entries) {
    const char *state = !e.built ? "not built" : e.available ? "available" : "unavailable";
    print_out("{:<8} {:<12} {}\n", e.backend, state, e.detail);
    if (!e.info)
      continue;
    const runtime::DeviceInfo &info = *e.info;
    std::string features;
    for (const auto &[name, on] : feature_flags(info.features))
      if (on)
        features += (features.empty() ? "" : " ") + std::string(name);
    print_out(
        "{:<21} {}, arch {}, subgroup size {}, shared memory {} B, parameter block {} B, workgroup "
        "up to {} invocations\n",
        "", runtime::device_class_name(info.device_class), info.arch.empty() ? "-" : info.arch,
        info.subgroup_size, info.features.max_shared_bytes, info.features.max_param_block_bytes,
        info.features.max_workgroup_invocations);
    print_out("{:<21} {}\n", "", features);
  }
  runtime::PoolOptions pool;
  print_out("memory pool: {}, cached bytes {}, idle blocks freed after {} allocations, reserved "
            "at most {} x peak requested, exact class after {} requests\n",
            runtime::pool_policy_name(pool.policy),
            pool.max_cached_bytes == std::numeric_limits<uint64_t>::max()
                ? std::string("uncapped")
                : fmt::format("capped at {}", pool.max_cached_bytes),
            pool.idle_release_allocations, pool.max_reserved_ratio, pool.exact_class_after);
  return kSuccess;
}

} // namespace cubecc::tools
