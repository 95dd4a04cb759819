/*===- cubecc.h - The C API: embed the cubecc runtime in another framework ---------------------===
 *
 * Pure C (C99 and later, and C++): opaque handles, status codes and a thread-local last-error
 * message; no exception ever crosses it. What it covers: opening a runtime on a device, using an
 * environment bundle (prebuilt kernels), buffers (allocated, or adopted from the caller's CUDA,
 * HIP, Vulkan or host memory), kernels from a kernel library built with the DSL, launches with
 * arguments checked against the kernel's signature, and DLPack interop. docs/embedding.md is the
 * guide; this header is the reference.
 *
 * Conventions, for every function:
 *   - It returns a cubecc_status (CUBECC_SUCCESS = 0), except the few that return a string or
 *     nothing. On failure cubecc_last_error() says what failed, naming the kernel, file or
 *     parameter, and what to do; outputs are left untouched. Success clears the message.
 *   - Handles come from a function named ..._open, ..._allocate, ..._adopt_..., ..._kernel or
 *     ..._from_dlpack and belong to the caller, who gives each back exactly once with its
 *     ..._destroy function (NULL is accepted and does nothing). A NULL handle or output pointer
 *     elsewhere is CUBECC_ERROR_INVALID_ARGUMENT.
 *   - Buffers and kernels belong to the runtime that made them: using them with another runtime
 *     is CUBECC_ERROR_INVALID_ARGUMENT. A buffer may outlive its runtime (it keeps the device
 *     alive) but can then only be destroyed or exported.
 *   - A runtime may be called from any thread at once: it is the thread-safe context of its
 *     device (its launches and copies go to one queue, locked around each call, which every
 *     thread shares: cubecc_synchronize waits for all of it). Buffers may be destroyed on any
 *     thread, but not while another thread's call is using the handle. cubecc_last_error() is
 *     per thread.
 *   - Strings returned by the API stay valid as documented on each function; never free them.
 *
 *===-------------------------------------------------------------------------------------------===*/
#ifndef CUBECC_H
#define CUBECC_H

#include <dlpack/dlpack.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The version of this C API (the functions and structs of this header). 2: tensor arguments
 *  (cubecc_tensor, CUBECC_ARG_TENSOR) and cubecc_kernel_parameter_name. */
#define CUBECC_C_API_VERSION 2

/** After an enum's name: in C++, `int` as its fixed underlying type, so that any int a C caller
 *  passes (an unknown dtype, a garbage kind) is a value the implementation may read and refuse,
 *  not undefined behaviour. C sees a plain enum: the same size and representation. */
#ifdef __cplusplus
#define CUBECC_ENUM_INT : int
#else
#define CUBECC_ENUM_INT
#endif

/*===- Status codes and errors
 * -----------------------------------------------------------------===*/

typedef enum cubecc_status CUBECC_ENUM_INT {
  CUBECC_SUCCESS = 0,
  /** A NULL handle or pointer, a value out of range, a buffer or kernel of another runtime, an
   *  argument that does not match the kernel's parameter. */
  CUBECC_ERROR_INVALID_ARGUMENT = 1,
  /** No kernel of that name (or configuration) in the library; a library file that is missing. */
  CUBECC_ERROR_NOT_FOUND = 2,
  /** The device asked for does not open (no driver, no GPU, backend not built). */
  CUBECC_ERROR_NO_DEVICE = 3,
  /** A kernel did not trace, optimize or compile for the device. */
  CUBECC_ERROR_COMPILE = 4,
  /** An environment bundle is missing, damaged or of another toolchain, or (strict mode) does not
   *  hold a kernel. */
  CUBECC_ERROR_ENVIRONMENT = 5,
  /** The device or the host ran out of memory. */
  CUBECC_ERROR_OUT_OF_MEMORY = 6,
  /** Something this runtime's device cannot do: memory of another backend, a dtype DLPack or the
   *  kernel cannot hold, Vulkan handles of a non-Vulkan device. */
  CUBECC_ERROR_UNSUPPORTED = 7,
  /** A bug in cubecc: the message says where. To test an application's handling of it, set the
   *  environment variable CUBECC_TEST_INTERNAL_ERROR=1: cubecc_runtime_statistics then fails
   *  with this status (a test hook; never set it in production). */
  CUBECC_ERROR_INTERNAL = 8,
  /** The device failed while running work: a kernel that faulted (an out-of-bounds access
   *  found in checked mode, CUBECC_CHECKED=1), a lost device. The message names the kernel. */
  CUBECC_ERROR_DEVICE_FAILURE = 9,
} cubecc_status;

/** "CUBECC_SUCCESS", "CUBECC_ERROR_INVALID_ARGUMENT", ...; "unknown status" for other values. A
 *  static string. */
const char *cubecc_status_name(cubecc_status status);

/** The message of the last call that failed on this thread, "" after a call that succeeded.
 *  Valid until the next cubecc call on this thread. */
const char *cubecc_last_error(void);

/** The cubecc version, e.g. "0.1.0". A static string. */
const char *cubecc_version(void);

/*===- Element types
 * ---------------------------------------------------------------------------===*/

typedef enum cubecc_dtype CUBECC_ENUM_INT {
  CUBECC_DTYPE_BOOL = 0, /**< scalar arguments only: buffers cannot hold bool */
  CUBECC_DTYPE_I8,
  CUBECC_DTYPE_I16,
  CUBECC_DTYPE_I32,
  CUBECC_DTYPE_I64,
  CUBECC_DTYPE_U8,
  CUBECC_DTYPE_U16,
  CUBECC_DTYPE_U32,
  CUBECC_DTYPE_U64,
  CUBECC_DTYPE_F16,
  CUBECC_DTYPE_BF16,
  CUBECC_DTYPE_F32,
  CUBECC_DTYPE_F64,
  /** Storage floats (docs/ir.md §2.1): one byte each; kernels load, store and convert them.
   * DLPack 0.6 has no codes for them: they do not cross cubecc_*_dlpack. */
  CUBECC_DTYPE_E4M3,
  CUBECC_DTYPE_E5M2,
  CUBECC_DTYPE_E2M1,
  CUBECC_DTYPE_UE8M0,
} cubecc_dtype;

/** "bool", "i8", ..., "f64" (the IR's names); "unknown dtype" otherwise. A static string. */
const char *cubecc_dtype_name(cubecc_dtype dtype);
/** Bytes per element: 1, 2, 4 or 8 (bool: 1); 0 for an unknown dtype. */
size_t cubecc_dtype_size(cubecc_dtype dtype);

/*===- Handles
 * ---------------------------------------------------------------------------------===*/

typedef struct cubecc_runtime_t *cubecc_runtime; /**< one device, its memory pool and kernels */
typedef struct cubecc_buffer_t *cubecc_buffer;   /**< device memory holding elements of a dtype */
typedef struct cubecc_library_t *cubecc_library; /**< a kernel library (.so) built with the DSL */
typedef struct cubecc_kernel_t *cubecc_kernel;   /**< a kernel compiled for one runtime */

/*===- Runtime
 * ---------------------------------------------------------------------------------===*/

/** Opens a runtime on `device`: "vulkan", "cuda", "hip", "interp", or NULL / "" for the
 *  CUBECC_DEVICE environment variable or, if unset, the best device present (cuda, hip, vulkan,
 *  then interp). When CUBECC_ENV names an environment bundle, the runtime uses it (as
 *  cubecc_runtime_use_environment with flags 0). *out is the caller's: cubecc_runtime_destroy.
 *  Errors: CUBECC_ERROR_NO_DEVICE (the message says why, e.g. "no device: cuda: libcuda.so.1 not
 *  found (no NVIDIA driver)"). */
cubecc_status cubecc_runtime_open(const char *device, cubecc_runtime *out);

/** Waits for the queued work and closes the runtime. Kernels of the runtime must not be used
 *  afterwards (destroy them before or after); buffers stay valid for destroy and DLPack export.
 *  NULL does nothing. */
void cubecc_runtime_destroy(cubecc_runtime runtime);

/** What the device is. The strings belong to the runtime and stay valid until it is destroyed. */
typedef struct cubecc_device_info {
  const char *backend; /**< "vulkan", "cuda", "hip", "interp" */
  const char *name;    /**< the driver's device name */
  const char *driver;  /**< driver name and version */
  const char *vendor;
  const char *arch; /**< "sm_90", "gfx90a", Vulkan "vendorid:deviceid"; "" if none */
  uint32_t subgroup_size;
  uint64_t max_buffer_bytes;
} cubecc_device_info;
cubecc_status cubecc_runtime_device_info(cubecc_runtime runtime, cubecc_device_info *out);

/** Flags of cubecc_runtime_use_environment. */
enum {
  /** Strict: a bundle that does not open or is not valid is an error of this call, and loading a
   *  kernel the bundle does not hold (or holds damaged) is an error instead of a JIT compile. */
  CUBECC_ENVIRONMENT_STRICT = 1u,
  /** Signed bundles only: a bundle not signed (`cubecc env sign`) by one of the trusted keys
   *  (those given to cubecc_runtime_use_signed_environment, and those the CUBECC_TRUSTED_KEYS
   *  environment variable names), or changed in any byte since it was signed, is refused before
   *  any of it is used, as a bundle that does not open is. Setting CUBECC_TRUSTED_KEYS turns
   *  this on for every bundle a runtime uses. */
  CUBECC_ENVIRONMENT_REQUIRE_SIGNATURE = 2u,
};

/** Loads kernels from the environment bundle at `path` (built by `cubecc env build`) before
 *  compiling them. Without CUBECC_ENVIRONMENT_STRICT, a bundle that does not open (or, where
 *  signatures are required, is not signed by a trusted key) is a logged warning and the runtime
 *  compiles as without one. Replaces the environment in use, if any; the runtime maps the file
 *  for as long as it uses it (reads it whole where signatures are required). Errors:
 *  CUBECC_ERROR_ENVIRONMENT (strict: the message names the file and what is wrong with it). */
cubecc_status cubecc_runtime_use_environment(cubecc_runtime runtime, const char *path,
                                             uint32_t flags);

/** cubecc_runtime_use_environment, trusting the `num_keys` public keys `trusted_keys` (each 64
 *  hexadecimal digits, or the path of a public key file `cubecc env keygen` wrote) besides those
 *  of CUBECC_TRUSTED_KEYS, with CUBECC_ENVIRONMENT_REQUIRE_SIGNATURE implied. A key that is
 *  neither is refused like an unsigned bundle (the message names it). */
cubecc_status cubecc_runtime_use_signed_environment(cubecc_runtime runtime, const char *path,
                                                    uint32_t flags, const char *const *trusted_keys,
                                                    size_t num_keys);

/** What the runtime did so far. */
typedef struct cubecc_statistics {
  uint64_t environment_hits;     /**< kernels loaded from the environment bundle */
  uint64_t environment_misses;   /**< kernels it did not hold */
  uint64_t environment_rejected; /**< entries it held but could not use (damaged, other toolkit) */
  uint64_t compiles;             /**< kernels compiled (JIT) on the device */
  uint64_t kernel_cache_hits;    /**< kernel requests answered by the in-process cache */
  uint64_t pool_bytes_reserved;  /**< device memory the memory pool holds (live and cached) */
  uint64_t pool_bytes_live;      /**< of it, held by live buffers */
} cubecc_statistics;
cubecc_status cubecc_runtime_statistics(cubecc_runtime runtime, cubecc_statistics *out);

/*===- Buffers
 * ---------------------------------------------------------------------------------===*/

/** A buffer of `count` elements of `dtype` (count > 0; contents unspecified) from the runtime's
 *  memory pool. *out is the caller's: cubecc_buffer_destroy. Errors: CUBECC_ERROR_INVALID_ARGUMENT
 *  (bool, count 0), CUBECC_ERROR_OUT_OF_MEMORY. */
cubecc_status cubecc_buffer_allocate(cubecc_runtime runtime, cubecc_dtype dtype, size_t count,
                                     cubecc_buffer *out);

/** Gives the buffer back. Allocated memory returns to the pool; adopted memory is let go and its
 *  release callback runs (after the launches queued before that may use it). NULL does nothing. */
void cubecc_buffer_destroy(cubecc_buffer buffer);

/** Copies `bytes` (at most the buffer's size in bytes) from host memory `src` into the start of
 *  the buffer, after the launches queued before it. `src` may be reused when the call returns. */
cubecc_status cubecc_buffer_write(cubecc_runtime runtime, cubecc_buffer buffer, const void *src,
                                  size_t bytes);
/** Waits for the launches queued before it, then copies the first `bytes` of the buffer to the
 *  host memory `dst`. */
cubecc_status cubecc_buffer_read(cubecc_runtime runtime, cubecc_buffer buffer, void *dst,
                                 size_t bytes);

/** The buffer's element count, dtype and size in bytes. */
cubecc_status cubecc_buffer_count(cubecc_buffer buffer, size_t *count);
cubecc_status cubecc_buffer_dtype(cubecc_buffer buffer, cubecc_dtype *dtype);
cubecc_status cubecc_buffer_bytes(cubecc_buffer buffer, size_t *bytes);

/*===- Adopting the caller's memory
 * ------------------------------------------------------------===*/

/** Called once when an adopted buffer is let go: when cubecc_buffer_destroy was called and every
 *  DLPack tensor exported from it was deleted, after the launches that may use the memory have
 *  finished. It runs on the thread that lets go last, or, when launches still used the memory
 *  then, on a thread whose later call on the runtime finds them done, at the end of that call
 *  with no lock of cubecc's held: it may call cubecc functions (never with the buffer itself) and
 *  take the caller's own locks. */
typedef void (*cubecc_release_fn)(void *user_data);

/** A buffer over `count` elements of `dtype` in memory the caller owns: no copy is made, and
 *  cubecc never frees the memory. Launches, reads and writes use it like an allocated buffer. The
 *  memory must stay valid until `release` (if not NULL) is called with `user_data`, or, without a
 *  callback, until the buffer is destroyed and every DLPack tensor exported from it deleted. On
 *  failure `release` is not called and the memory stays the caller's. *out is the caller's:
 *  cubecc_buffer_destroy.
 *  Errors: CUBECC_ERROR_UNSUPPORTED when the memory is not of the runtime's backend (host memory
 *  on a runtime that is not interp, a VkBuffer on cuda, ...); CUBECC_ERROR_INVALID_ARGUMENT for a
 *  NULL pointer or handle, count 0, bool, or a pointer (Vulkan: offset) not aligned to the
 *  element size.
 *
 *  host:   a host pointer, on the interp and cpu devices.
 *  cuda:   a CUdeviceptr allocated in the CUDA device's context (the device's primary context).
 *  hip:    a HIP device pointer on the hip device.
 *  vulkan: a VkBuffer (its handle as an integer) made on the runtime's own VkDevice
 *          (cubecc_runtime_vulkan_handles) with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (plus
 *          TRANSFER_SRC and TRANSFER_DST for cubecc_buffer_read/write, which copy through a
 *          staging buffer) and memory bound; the buffer's elements start `offset` bytes into it,
 *          a multiple of the device's minStorageBufferOffsetAlignment. */
cubecc_status cubecc_buffer_adopt_host(cubecc_runtime runtime, void *pointer, cubecc_dtype dtype,
                                       size_t count, cubecc_release_fn release, void *user_data,
                                       cubecc_buffer *out);
cubecc_status cubecc_buffer_adopt_cuda(cubecc_runtime runtime, uint64_t device_pointer,
                                       cubecc_dtype dtype, size_t count, cubecc_release_fn release,
                                       void *user_data, cubecc_buffer *out);
cubecc_status cubecc_buffer_adopt_hip(cubecc_runtime runtime, void *device_pointer,
                                      cubecc_dtype dtype, size_t count, cubecc_release_fn release,
                                      void *user_data, cubecc_buffer *out);
cubecc_status cubecc_buffer_adopt_vulkan(cubecc_runtime runtime, uint64_t vk_buffer,
                                         uint64_t offset, cubecc_dtype dtype, size_t count,
                                         cubecc_release_fn release, void *user_data,
                                         cubecc_buffer *out);

/** The Vulkan handles of a runtime on the vulkan device, for making buffers on the same device:
 *  VkInstance, VkPhysicalDevice and VkDevice (dispatchable handles, as pointers), the queue family
 *  the runtime submits to, and the loader's vkGetInstanceProcAddr (a PFN_vkGetInstanceProcAddr).
 *  They belong to the runtime: valid while it lives; never destroy them. Errors:
 *  CUBECC_ERROR_UNSUPPORTED on another device. */
typedef struct cubecc_vulkan_handles {
  void *instance;
  void *physical_device;
  void *device;
  uint32_t queue_family_index;
  void *get_instance_proc_addr;
} cubecc_vulkan_handles;
cubecc_status cubecc_runtime_vulkan_handles(cubecc_runtime runtime, cubecc_vulkan_handles *out);

/*===- DLPack
 * ----------------------------------------------------------------------------------===*/

/** Shares the buffer's memory as a 1-D DLPack tensor (shape {count}, strides NULL): device kDLCPU
 *  (interp), kDLCUDA, kDLROCM, or kDLVulkan with `data` the VkBuffer handle and `byte_offset`
 *  where the elements start in it. The memory stays alive until the tensor's deleter runs, even
 *  after cubecc_buffer_destroy; the caller (or the framework it hands the tensor to) must call
 *  (*out)->deleter(*out) exactly once. Every buffer dtype has a DLPack type code (bf16 is
 *  kDLBfloat). */
cubecc_status cubecc_buffer_to_dlpack(cubecc_buffer buffer, DLManagedTensor **out);

/** Adopts the memory of a DLPack tensor as a buffer of all its elements (the tensor flattened in
 *  row-major order), without copying. On success the buffer owns the tensor: its deleter (if not
 *  NULL) is called once when the buffer is let go (see cubecc_release_fn); the caller must not
 *  call it. On failure the tensor stays the caller's. Errors: CUBECC_ERROR_UNSUPPORTED for a
 *  device type that is not the runtime's (kDLCPU on interp and cpu, kDLCUDA on cuda, kDLROCM on
 *  hip, kDLVulkan on vulkan), a dtype with lanes != 1 or no cubecc equivalent (complex, bool,
 *  opaque), or strides that are not compact row-major; CUBECC_ERROR_INVALID_ARGUMENT for a NULL
 *  tensor or data, no elements, or misaligned data. */
cubecc_status cubecc_buffer_from_dlpack(cubecc_runtime runtime, DLManagedTensor *tensor,
                                        cubecc_buffer *out);

/*===- Kernel libraries and kernels
 * ------------------------------------------------------------===*/

/** Opens a kernel library: a shared library built with the DSL (it registers kernels; see
 *  docs/dsl.md). *out is the caller's: cubecc_library_destroy. Kernels obtained from it stay
 *  valid after it is destroyed. Errors: CUBECC_ERROR_NOT_FOUND (the message names the file and
 *  why it did not load). */
cubecc_status cubecc_library_open(const char *path, cubecc_library *out);
void cubecc_library_destroy(cubecc_library library);

/** The number of kernels (name + configuration pairs) in the library. */
cubecc_status cubecc_library_kernel_count(cubecc_library library, size_t *count);
/** The name and configuration of kernel `index` (< the count); the strings belong to the library
 *  and stay valid until it is destroyed. Either output may be NULL. */
cubecc_status cubecc_library_kernel_info(cubecc_library library, size_t index, const char **name,
                                         const char **configuration);

/** The kernel `name` of the library compiled for the runtime's device: `configuration` picks one
 *  of the kernel's configurations ("width=4"); NULL picks the first. It comes from the runtime's
 *  environment bundle when the bundle holds it (no tracing or compiling then on a second request
 *  either: the runtime caches kernels), else it is traced and compiled (or, strict, refused).
 *  *out is the caller's: cubecc_kernel_destroy. Errors: CUBECC_ERROR_NOT_FOUND (no such kernel or
 *  configuration: the message lists what the library has), CUBECC_ERROR_ENVIRONMENT (strict, not
 *  in the bundle), CUBECC_ERROR_COMPILE. */
cubecc_status cubecc_library_kernel(cubecc_runtime runtime, cubecc_library library,
                                    const char *name, const char *configuration,
                                    cubecc_kernel *out);

/** The kernel `name` of kernel library `library` ("examples" for libexamples.so: the name
 *  `cubecc env build` recorded), registered with `configuration` (NULL or "" for none), from the
 *  runtime's environment bundle — without the library: nothing is traced or compiled, and the
 *  launch checks use the parameter names and types the bundle recorded. The bundle is trusted
 *  to be the library's; a program that has the library and wants that checked uses
 *  cubecc_library_kernel instead. *out is the caller's: cubecc_kernel_destroy. Errors:
 *  CUBECC_ERROR_INVALID_ARGUMENT (no environment in use: cubecc_runtime_use_environment first),
 *  CUBECC_ERROR_NOT_FOUND (the bundle has no such kernel: the message lists what it has),
 *  CUBECC_ERROR_ENVIRONMENT (the bundle cannot serve this device: no binary for it, damage,
 *  another cubecc or toolkit). */
cubecc_status cubecc_environment_kernel(cubecc_runtime runtime, const char *library,
                                        const char *name, const char *configuration,
                                        cubecc_kernel *out);
void cubecc_kernel_destroy(cubecc_kernel kernel);

/** The kernel's name (valid while the kernel handle lives) and its IR parameter count: a DSL
 *  Tensor parameter is three IR parameters (buffer, element count u32, stride u32). */
const char *cubecc_kernel_name(cubecc_kernel kernel);
cubecc_status cubecc_kernel_parameter_count(cubecc_kernel kernel, size_t *count);
/** The name of IR parameter `index` (< the count), as the DSL traced it (or, for
 *  cubecc_environment_kernel, as the bundle recorded it): "x", "x.shape0", "x.stride0" for a
 *  Tensor parameter x. Valid while the kernel handle lives. */
cubecc_status cubecc_kernel_parameter_name(cubecc_kernel kernel, size_t index, const char **name);

/*===- Launches
 * --------------------------------------------------------------------------------===*/

typedef enum cubecc_arg_kind CUBECC_ENUM_INT {
  CUBECC_ARG_BUFFER = 0,
  CUBECC_ARG_SCALAR = 1,
  /** A tensor (value.tensor) for all the IR parameters of one DSL Tensor parameter. */
  CUBECC_ARG_TENSOR = 2,
} cubecc_arg_kind;

/** The most dimensions a tensor has (as a DSL Tensor<T, Rank>). */
#define CUBECC_MAX_RANK 8

/** A strided view of a buffer's elements: what a DSL `Tensor<T, Rank>` parameter takes. Element
 *  (i0, i1, ...) is element offset + sum(i_d * strides[d]) of the buffer; dimension 0 is the
 *  outermost. The arrays are read during the call only. */
typedef struct cubecc_tensor {
  cubecc_buffer buffer;
  cubecc_dtype dtype;     /**< the buffer's dtype (stated, so that a mix-up is caught) */
  int32_t rank;           /**< 1 to CUBECC_MAX_RANK */
  const int64_t *shape;   /**< `rank` sizes, each 0 to 2^32 - 1 */
  const int64_t *strides; /**< `rank` strides in elements (0 to 2^32 - 1); NULL: row-major */
  int64_t offset;         /**< where element (0, 0, ...) is in the buffer, in elements */
} cubecc_tensor;

/** One launch argument: for one IR parameter of the kernel, or (CUBECC_ARG_TENSOR) for the IR
 *  parameters of one DSL Tensor parameter. A buffer argument needs a buffer
 *  whose dtype is the parameter's element type. A scalar is read from the member of `value` its
 *  dtype names: i for I8..I64, u for U8..U64 (and BOOL: 0 or 1), f for F16..F64; then checked as
 *  the C++ runtime checks it: a float goes only to a float parameter (rounded to its width), an
 *  integer only to an integer parameter whose range holds the value, a bool only to a bool. */
typedef struct cubecc_arg {
  cubecc_arg_kind kind;
  cubecc_dtype dtype;   /**< CUBECC_ARG_SCALAR: which member of `value` holds it */
  cubecc_buffer buffer; /**< CUBECC_ARG_BUFFER */
  union {
    int64_t i;
    uint64_t u;
    double f;
    const cubecc_tensor *tensor; /**< CUBECC_ARG_TENSOR */
  } value;
} cubecc_arg;

/** Queues a launch of grid[0] x grid[1] x grid[2] workgroups of `kernel` with `num_args`
 *  arguments, in order: one per IR parameter, except that a CUBECC_ARG_TENSOR stands for all the
 *  IR parameters of one DSL Tensor<T, R> parameter (its buffer `x`, then `x.shape0` ...
 *  `x.shape<R-1>`, then `x.stride0` ... `x.stride<R-1>`, as the kernel's parameter names say).
 *  A tensor is checked against that parameter: its dtype (the buffer's) against T, its rank
 *  against R, its elements inside the buffer, its sizes and strides against 32 bits; errors name
 *  the parameter ("cubecc_launch: kernel 'axpy': argument 1 (tensor 'y'): the kernel's tensor
 *  has 1 dimension(s), the descriptor 2"). Launches run in order; the buffers must stay
 *  alive until they finished (cubecc_synchronize, or a read of a buffer written). Errors:
 *  CUBECC_ERROR_INVALID_ARGUMENT, with a message naming the kernel and the parameter
 *  ("launch of kernel 'axpy': parameter 6 (%a: f32): needs a floating-point value, got an
 *  integer (convert it explicitly)") or the count and the kernel's signature;
 *  CUBECC_ERROR_DEVICE_FAILURE on devices that run a launch at once (interp, cpu) when it faults
 *  (an out-of-bounds access in checked mode, CUBECC_CHECKED=1). */
cubecc_status cubecc_launch(cubecc_runtime runtime, cubecc_kernel kernel, const uint32_t grid[3],
                            const cubecc_arg *args, size_t num_args);

/** Waits for every queued launch and copy. A launch that failed on the device (a driver error, a
 *  faulting kernel) is reported here, as CUBECC_ERROR_DEVICE_FAILURE with the device's message;
 *  devices that run launches at once (interp, cpu) report their failures from cubecc_launch,
 *  with the same status. */
cubecc_status cubecc_synchronize(cubecc_runtime runtime);

/** The device time of each launch completed by the last cubecc_synchronize, in nanoseconds, in
 *  launch order: the first min(*count, capacity) are written to `times_ns` (may be NULL when
 *  `capacity` is 0), and *count is set to how many there are. */
cubecc_status cubecc_last_launch_times(cubecc_runtime runtime, double *times_ns, size_t capacity,
                                       size_t *count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUBECC_H */
