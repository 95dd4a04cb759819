//===- devices.h - `cubecc devices`: the backends built in and the devices present ------------===//
#pragma once

namespace cubecc::tools {

/// Prints every backend (built or not), whether a device opens and what it offers; as JSON when
/// `json`. Returns the exit code (0: listing never fails, a missing device is a listed fact).
int devices_command(bool json);

} // namespace cubecc::tools
