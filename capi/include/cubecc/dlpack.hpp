//===- dlpack.hpp - Host tensors to and from DLPack, without copying --------------------------===//
//
//   cubecc::Tensor t = cubecc::tensor_from_dlpack(rt, framework_tensor);  // adopts its memory
//   DLManagedTensor *shared = cubecc::tensor_to_dlpack(rt, t);             // shares t's memory
//
// The C++ side of the C API's cubecc_buffer_from_dlpack and cubecc_buffer_to_dlpack, with the
// same code (capi/src/cubecc.cpp) and the same rules, except that a tensor keeps its shape and
// strides: a strided DLPack tensor (non-negative strides) becomes a strided cubecc::Tensor over
// the elements it reaches, and an exported tensor has the Tensor's shape, strides and offset.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/tensor.h"

#include <dlpack/dlpack.h>

#include <optional>

namespace cubecc {

/// The element type of a DLPack dtype (lanes 1; bf16 from kDLBfloat), or none when cubecc has no
/// equivalent (bool, complex, vectors, opaque handles).
std::optional<ir::Scalar> element_of_dlpack(DLDataType dtype);

/// The DLPack device of memory of `kind` on this process's device of that backend: kDLCPU (host
/// memory), kDLCUDA, kDLROCM or kDLVulkan, with the device index the backend opened.
DLDevice dlpack_device_of(runtime::ExternalMemory::Kind kind);

/// Adopts `tensor`'s memory on `rt` as a Tensor of its dtype, shape and strides, without copying.
/// On success the Tensor's storage owns the DLPack tensor: its deleter runs once when the last
/// Tensor (and graph) using the memory is gone. On failure the tensor stays the caller's and a
/// runtime::Error says why: Unsupported for a device type that is not the runtime's (kDLCPU on
/// interp and cpu, kDLCUDA on cuda, kDLROCM on hip, kDLVulkan on vulkan), a dtype without a
/// cubecc element type or a negative stride; InvalidArgument for NULL, no elements or misaligned
/// data.
runtime::Tensor tensor_from_dlpack(runtime::Runtime &rt, DLManagedTensor *tensor);

/// Shares `tensor`'s memory as a DLPack tensor with its shape, strides and offset (byte_offset;
/// Vulkan: data is the VkBuffer). The memory stays alive until the DLPack tensor's deleter runs;
/// whoever ends up with it calls the deleter exactly once. Throws runtime::Error (Unsupported)
/// for an element type DLPack 0.6 has no code for.
DLManagedTensor *tensor_to_dlpack(runtime::Runtime &rt, const runtime::Tensor &tensor);

} // namespace cubecc
