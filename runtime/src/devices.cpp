//===- devices.cpp - The backends built in, and opening one by name ---------------------------===//
#include "cubecc/runtime/device.h"

#include "cpu/cpu_device.h"
#include "cubecc/runtime/cuda_device.h"
#include "cubecc/runtime/hip_device.h"
#include "interp/interp_device.h"
#ifdef CUBECC_HAVE_VULKAN
#include "cubecc/runtime/vulkan_device.h"
#endif

#include <fmt/format.h>

#include <cstdlib>

namespace cubecc::runtime {

namespace {

struct Backend {
  const char *name;
  /// Null when the backend is not built; `why_not` says why.
  std::unique_ptr<Device> (*open)();
  const char *why_not;
};

// In the order Runtime::open() tries them; it takes the first GPU, else the best kind of device
// that opened (DeviceKind: cpu before a Vulkan CPU implementation, the interpreter last).
const Backend kBackends[] = {
    {"cuda", [] { return std::unique_ptr<Device>(CudaDevice::open()); }, nullptr},
    {"hip", [] { return std::unique_ptr<Device>(HipDevice::open()); }, nullptr},
#ifdef CUBECC_HAVE_VULKAN
    {"vulkan", [] { return std::unique_ptr<Device>(VulkanDevice::open()); }, nullptr},
#else
    {"vulkan", nullptr, "built without volk (install libvulkan-volk-dev and reconfigure)"},
#endif
    {"cpu", [] { return open_cpu_device(); }, nullptr},
    {"interp", [] { return open_interp_device(); }, nullptr},
};

std::unique_ptr<Device> open_backend(const Backend &backend) {
  if (!backend.open)
    throw Error(fmt::format("backend {} not built: {}", backend.name, backend.why_not));
  return backend.open();
}

} // namespace

std::vector<DeviceEntry> list_devices() {
  std::vector<DeviceEntry> entries;
  for (const Backend &backend : kBackends) {
    DeviceEntry entry;
    entry.backend = backend.name;
    entry.built = backend.open != nullptr;
    if (!entry.built) {
      entry.detail = backend.why_not;
    } else {
      try {
        std::unique_ptr<Device> device = backend.open();
        entry.available = true;
        entry.detail = device->info().name;
        entry.info = device->info();
      } catch (const Error &e) {
        entry.detail = e.what();
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::unique_ptr<Device> open_device(const std::string &name) {
  std::string wanted = name;
  if (wanted.empty())
    if (const char *env = std::getenv("CUBECC_DEVICE"))
      wanted = env;
  if (wanted.empty()) {
    // The best device present: the first GPU, else the device of the best kind that opened
    // (interp always does).
    std::string reasons;
    std::unique_ptr<Device> best;
    for (const Backend &backend : kBackends) {
      if (!backend.open)
        continue;
      try {
        std::unique_ptr<Device> device = backend.open();
        if (device->info().kind == DeviceKind::Gpu)
          return device;
        if (!best || device->info().kind < best->info().kind)
          best = std::move(device);
      } catch (const Error &e) {
        reasons += fmt::format("\n  {}", e.what());
      }
    }
    if (best)
      return best;
    throw Error("no device: none of the built backends opened:" + reasons);
  }
  std::string known;
  for (const Backend &backend : kBackends) {
    if (wanted == backend.name)
      return open_backend(backend);
    known += (known.empty() ? "" : ", ") + std::string(backend.name);
  }
  throw Error(fmt::format("no device: unknown device '{}' (known: {})", wanted, known));
}

} // namespace cubecc::runtime
