//===- example_cases.h - The example kernels' end-to-end cases, for any way of running them ---===//
//
// One case per registered example kernel (examples/kernels): inputs, launches and a comparison
// with a host computation of what the kernel's header comment promises (see example_cases.cpp).
// The unit tests run them in the reference interpreter, after every pass; the e2e suite runs them
// on every device (interp, vulkan) through set_launcher().
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/registry.h"
#include "cubecc/ir/interpreter.h"

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cubecc::test::examples {

/// One run of a case: the traced kernel and the subgroup width.
struct Case {
  const dsl::RegisteredKernel &registered;
  const ir::Kernel &kernel;
  uint32_t subgroup_size;
  uint32_t workgroup(int d) const { return kernel.workgroup_size()[d]; }
};

using Runner = std::function<void(const Case &)>;

/// One entry per registered example kernel (configuration), by name.
const std::vector<std::pair<std::string_view, Runner>> &cases();
/// The runner of the case named `name`, or null.
const Runner *find_case(std::string_view name);
std::vector<std::string> registered_names();

/// How the cases' launches run: the reference interpreter unless set (null restores it). The
/// launcher returns the
/// problems of the launch (empty: it completed); buffers are read and written in place.
using Launcher = std::function<std::vector<ir::Diagnostic>(
    const ir::Kernel &, std::span<const ir::Argument>, const ir::LaunchConfig &)>;
void set_launcher(Launcher launcher);

} // namespace cubecc::test::examples
