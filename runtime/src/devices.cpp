//===- devices.cpp - The device kinds built in, and opening one by name -----------------------===//
#include "cubecc/runtime/device.h"

#include <fmt/format.h>

#include <cstdlib>
#include <unistd.h>

namespace cubecc::runtime {

/// The table runtime/CMakeLists.txt generates from the registered device folders.
std::span<const DeviceKind *const> registered_device_kinds();

std::span<const DeviceKind *const> device_kinds() {
  return registered_device_kinds();
}

const char *device_class_name(DeviceClass c) {
  switch (c) {
  case DeviceClass::Gpu:
    return "GPU";
  case DeviceClass::Cpu:
    return "CPU";
  case DeviceClass::Software:
    return "software";
  }
  return "?";
}

namespace {

std::unique_ptr<Device> open_kind(const DeviceKind &kind) {
  if (!kind.open)
    throw Error(ErrorKind::NoDevice,
                fmt::format("backend {} not built: {}", kind.name, kind.why_not));
  return kind.open();
}

} // namespace

std::vector<DeviceEntry> list_devices() {
  std::vector<DeviceEntry> entries;
  for (const DeviceKind *kind : device_kinds()) {
    DeviceEntry entry;
    entry.backend = kind->name;
    entry.built = kind->open != nullptr;
    if (!entry.built) {
      entry.detail = kind->why_not;
    } else {
      try {
        std::unique_ptr<Device> device = kind->open();
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
    // The best device present: a GPU as soon as one opens; else the best class that opened,
    // the earlier kind on a tie. A kind that cannot beat the device in hand is not opened.
    std::unique_ptr<Device> best;
    std::string reasons;
    for (const DeviceKind *kind : device_kinds()) {
      if (!kind->open || (best && kind->best_class >= best->info().device_class))
        continue;
      try {
        std::unique_ptr<Device> device = kind->open();
        if (!best || device->info().device_class < best->info().device_class)
          best = std::move(device);
        if (best->info().device_class == DeviceClass::Gpu)
          break;
      } catch (const Error &e) {
        reasons += fmt::format("\n  {}", e.what());
      }
    }
    if (!best)
      throw Error(ErrorKind::NoDevice, "no device: none of the built backends opened:" + reasons);
    return best;
  }
  std::string known;
  for (const DeviceKind *kind : device_kinds()) {
    if (wanted == kind->name)
      return open_kind(*kind);
    known += (known.empty() ? "" : ", ") + std::string(kind->name);
  }
  throw Error(ErrorKind::NoDevice,
              fmt::format("no device: unknown device '{}' (known: {})", wanted, known));
}

uint64_t host_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t(1) << 40;
}

} // namespace cubecc::runtime
