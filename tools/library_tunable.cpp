//===- library_tunable.cpp --------------------------------------------------------------------===//
#include "library_tunable.h"

#include "cubecc/ir/printer.h"

#include <fmt/format.h>

#include <optional>
#include <string_view>

namespace cubecc::tools {

autotune::LibraryTunable library_tunable(const dsl::KernelLibrary &library, size_t index) {
  const dsl::KernelLibrary::Tunable &t = library.tunables().at(index);
  autotune::LibraryTunable out;
  out.name = t.name;
  out.dimensions = t.dimensions;
  out.anchors = t.anchors;
  out.relative_tolerance = t.relative_tolerance;
  // Comma-separated scalar names; every entry must be one ("f32," has an empty last entry).
  std::string_view types = t.element_types;
  for (bool more = !types.empty(); more;) {
    size_t comma = types.find(',');
    std::string_view name = types.substr(0, comma);
    std::optional<ir::Scalar> s = ir::parse_scalar(name);
    if (!s)
      throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                           fmt::format("tunable '{}': bad element type '{}' in '{}' (scalar type "
                                       "names separated by commas, such as f16,f32)",
                                       t.name, name, t.element_types));
    out.element_types.push_back(*s);
    more = comma != std::string_view::npos;
    if (more)
      types = types.substr(comma + 1);
  }
  for (size_t kernel : t.variants) {
    const dsl::KernelLibrary::Entry &entry = library.kernels()[kernel];
    out.variants.push_back({entry.name, entry.configuration, [&library, kernel] {
                              auto module = std::make_unique<ir::Module>("tune");
                              std::vector<ir::Diagnostic> errors;
                              if (!library.trace(kernel, *module, errors))
                                throw runtime::Error(runtime::ErrorKind::Compile,
                                                     ir::to_string(errors), errors);
                              return module;
                            }});
  }
  out.describe = [&library, index](size_t variant, std::span<const uint64_t> shape,
                                   autotune::LaunchDescription &launch) {
    dsl::TunableLaunch described;
    std::string error;
    switch (library.describe(index, variant, shape, described, error)) {
    case dsl::KernelLibrary::Described::Invalid:
      return false;
    case dsl::KernelLibrary::Described::Failed:
      throw runtime::Error(runtime::ErrorKind::InvalidArgument, error);
    case dsl::KernelLibrary::Described::Launch:
      break;
    }
    launch.grid = described.grid;
    launch.buffer_elements = described.buffer_elements;
    launch.values.clear();
    for (const dsl::LaunchValue &v : described.values) {
      if (v.kind == dsl::LaunchValue::Int)
        launch.values.emplace_back(v.i);
      else if (v.kind == dsl::LaunchValue::UInt)
        launch.values.emplace_back(v.u);
      else
        launch.values.emplace_back(v.f);
    }
    return true;
  };
  return out;
}

} // namespace cubecc::tools
