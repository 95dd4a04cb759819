//===- version.h - The version of this cubecc -------------------------------------------------===//
//
// One place for the version that bundles, caches and `cubecc --version` report. A compiled kernel
// from another cubecc version is never reused (environments/): its code generators may differ.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <string_view>

namespace cubecc {

/// "0.1.0": the project version this library was built as.
std::string_view version();

} // namespace cubecc
