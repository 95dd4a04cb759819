//===- kernel_library_loader.cpp --------------------------------------------------------------===//
#include "cubecc/dsl/kernel_library_loader.h"

#include "cubecc/dsl/kernel_library.h"
#include "cubecc/ir/parser.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace cubecc::dsl {

std::unique_ptr<KernelLibrary> KernelLibrary::open(const std::string &path, std::string &error) {
  // A path without a slash would make dlopen search the library path instead of the file.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = fmt::format("{}: error: cannot load the kernel library: {}", path, dlerror());
    return nullptr;
  }
  using Entry = const cubecc_kernel_library *(*)();
  auto symbol = reinterpret_cast<Entry>(dlsym(handle, CUBECC_KERNEL_LIBRARY_SYMBOL));
  if (!symbol) {
    dlclose(handle);
    error = fmt::format("{}: error: not a cubecc kernel library: it does not export '{}' (link "
                        "it with cubecc::dsl and register kernels with dsl::register_kernel)",
                        path, CUBECC_KERNEL_LIBRARY_SYMBOL);
    return nullptr;
  }
  const cubecc_kernel_library *library = symbol();
  // Every version up to this cubecc's: later versions only append fields. The version is read
  // before dlclose, which unmaps the table.
  const uint32_t version = library ? library->abi_version : 0;
  if (version < 1 || version > CUBECC_KERNEL_LIBRARY_ABI_VERSION) {
    dlclose(handle);
    error = fmt::format("{}: error: the kernel library uses ABI version {}, this cubecc reads 1 "
                        "to {}; rebuild the library against this cubecc",
                        path, version, CUBECC_KERNEL_LIBRARY_ABI_VERSION);
    return nullptr;
  }
  std::unique_ptr<KernelLibrary> out(new KernelLibrary);
  out->path_ = path;
  out->handle_ = handle;
  out->library_ = library;
  for (uint32_t i = 0; i < library->count; ++i)
    out->entries_.push_back({library->kernels[i].name, library->kernels[i].configuration});
  if (library->abi_version >= 2 && !out->read_tunables(error))
    return nullptr; // the destructor closes the library
  return out;
}

bool KernelLibrary::read_tunables(std::string &error) {
  const cubecc_kernel_library &library = *library_;
  if (library.tunable_count > 0 && (!library.tunables || !library.describe_tunable)) {
    error = fmt::format("{}: error: the kernel library lists {} tunables without their table",
                        path_, library.tunable_count);
    return false;
  }
  for (uint32_t i = 0; i < library.tunable_count; ++i) {
    const cubecc_tunable_entry &entry = library.tunables[i];
    Tunable t;
    t.name = entry.name ? entry.name : "";
    auto fail = [&](const std::string &what) {
      error = fmt::format("{}: error: tunable '{}': {}", path_, t.name, what);
      return false;
    };
    if (t.name.empty())
      return fail("it has no name");
    if (entry.variant_count == 0 || !entry.variants)
      return fail("it has no variants");
    if (entry.dimension_count == 0 || !entry.dimensions)
      return fail("it has no dimensions");
    if (entry.anchor_count > 0 && !entry.anchors)
      return fail("it lists anchors without their table");
    for (uint32_t v = 0; v < entry.variant_count; ++v) {
      std::string variant = entry.variants[v] ? entry.variants[v] : "";
      size_t index = 0;
      while (index < entries_.size() && entries_[index].name != variant)
        ++index;
      if (index == entries_.size())
        return fail(fmt::format("variant '{}' is not a kernel of the library (register it with "
                                "dsl::register_kernel)",
                                variant));
      for (size_t earlier : t.variants)
        if (earlier == index)
          return fail(fmt::format("variant '{}' is listed twice", variant));
      t.variants.push_back(index);
    }
    for (uint32_t d = 0; d < entry.dimension_count; ++d)
      t.dimensions.emplace_back(entry.dimensions[d] ? entry.dimensions[d] : "");
    for (uint32_t a = 0; a < entry.anchor_count; ++a)
      t.anchors.emplace_back(entry.anchors + size_t{a} * entry.dimension_count,
                             entry.anchors + size_t{a + 1} * entry.dimension_count);
    t.element_types = entry.element_types ? entry.element_types : "";
    t.relative_tolerance = entry.relative_tolerance;
    if (!(t.relative_tolerance >= 0))
      return fail("its relative tolerance is negative or NaN");
    tunables_.push_back(std::move(t));
  }
  return true;
}

uint32_t KernelLibrary::abi_version() const {
  return library_->abi_version;
}

KernelLibrary::Described KernelLibrary::describe(size_t tunable, size_t variant,
                                                 std::span<const uint64_t> shape,
                                                 TunableLaunch &launch, std::string &error) const {
  if (tunable >= tunables_.size() || variant >= tunables_[tunable].variants.size()) {
    error = fmt::format("{}: error: no tunable {} with a variant {}", path_, tunable, variant);
    return Described::Failed;
  }
  const Tunable &t = tunables_[tunable];
  if (shape.size() != t.dimensions.size()) {
    error = fmt::format("{}: error: tunable '{}' has {} dimensions, the shape {}", path_, t.name,
                        t.dimensions.size(), shape.size());
    return Described::Failed;
  }
  cubecc_tunable_launch out{};
  int result = library_->describe_tunable(static_cast<uint32_t>(tunable),
                                          static_cast<uint32_t>(variant), shape.data(), &out);
  if (result == 0)
    return Described::Invalid;
  if (result != 1 || out.buffer_count > CUBECC_TUNABLE_MAX_BUFFERS ||
      out.value_count > CUBECC_TUNABLE_MAX_VALUES) {
    error = fmt::format("{}: error: tunable '{}': describing variant '{}' failed: {}", path_,
                        t.name, entries_[t.variants[variant]].name,
                        result == 1 ? "too many buffers or values" : library_->last_error());
    return Described::Failed;
  }
  launch = TunableLaunch{};
  launch.grid = {out.grid[0], out.grid[1], out.grid[2]};
  launch.buffer_elements.assign(out.buffer_elements, out.buffer_elements + out.buffer_count);
  for (uint32_t v = 0; v < out.value_count; ++v) {
    const cubecc_launch_value &value = out.values[v];
    switch (value.kind) {
    case CUBECC_LAUNCH_VALUE_INT:
      launch.values.emplace_back(value.value.i);
      break;
    case CUBECC_LAUNCH_VALUE_UINT:
      launch.values.emplace_back(value.value.u);
      break;
    case CUBECC_LAUNCH_VALUE_FLOAT:
      launch.values.emplace_back(value.value.f);
      break;
    default:
      error = fmt::format("{}: error: tunable '{}': value {} has unknown kind {}", path_, t.name, v,
                          value.kind);
      return Described::Failed;
    }
  }
  return Described::Launch;
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    dlclose(handle_);
}

bool KernelLibrary::trace(size_t index, ir::Module &module,
                          std::vector<ir::Diagnostic> &errors) const {
  const char *text = library_->trace_ir(static_cast<uint32_t>(index));
  if (!text) {
    errors.push_back({path_,
                      0,
                      0,
                      fmt::format("kernel '{}' failed to trace:\n{}", entries_[index].name,
                                  library_->last_error()),
                      {}});
    return false;
  }
  std::string buffer = fmt::format("{}:{}", path_, entries_[index].name);
  ir::ParseResult parsed = ir::parse_module(text, buffer);
  if (!parsed.module) {
    for (ir::Diagnostic &d : parsed.errors)
      d.notes.push_back("the kernel library produced IR this cubecc cannot read; rebuild it "
                        "against this cubecc");
    errors.insert(errors.end(), parsed.errors.begin(), parsed.errors.end());
    return false;
  }
  for (const auto &k : parsed.module->kernels()) {
    if (module.find_kernel(k->name())) {
      errors.push_back(
          {path_,
           0,
           0,
           fmt::format("two kernels are named '{}'; kernel names must be unique", k->name()),
           {}});
      return false;
    }
  }
  module.adopt_kernels(std::move(*parsed.module));
  return true;
}

} // namespace cubecc::dsl
