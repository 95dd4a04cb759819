//===- hiprtc_internal.h - The hipRTC half of the HIP backend, for tests and benchmarks -------===//
//
// Not a public header: the steps of compile_hip one at a time, so a test can feed hipRTC a source
// the emitter would never write and a benchmark can time each step on its own.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/hip.h"

namespace cubecc::codegen::hip_detail {

/// Checks every arch: well formed (gfxNNN, optionally with target features such as
/// ":xnack-"), known to the installed comgr, and all of one wavefront size (the emitted source
/// depends on it). On failure appends an error naming the arch and returns false.
bool check_hip_archs(const std::vector<std::string> &archs, std::vector<ir::Diagnostic> &errors);

/// One hipRTC compile of `source` for `arch` (which must have passed check_hip_archs): the code
/// object (an ELF). A failure appends an error with hipRTC's log.
std::optional<std::string> hiprtc_compile(const CSource &source, const std::string &arch,
                                          std::vector<ir::Diagnostic> &errors);

/// The options every hipRTC compile gets (without the architecture).
std::vector<std::string> hiprtc_options();

/// The base names ("gfx90a") of the ISAs the installed comgr knows; empty with `why` set when
/// comgr cannot be loaded.
std::vector<std::string> comgr_isas(std::string *why = nullptr);

} // namespace cubecc::codegen::hip_detail
