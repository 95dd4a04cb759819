"""cubecc: run kernels compiled by cubecc from Python.

    import cubecc, numpy as np
    rt = cubecc.Runtime()                        # $CUBECC_DEVICE, or the best device present
    rt.use_environment("app.cubeenv")            # optional: prebuilt kernels, no JIT
    axpy = rt.kernel("libkernels.so", "axpy")    # a kernel library built with the DSL
    x = rt.tensor(np.arange(1024, dtype=np.float32))
    y = rt.tensor(np.ones(1024, dtype=np.float32))
    rt.launch(axpy, axpy.grid_for(1024), x, y, 2.0)
    print(y.numpy())

Tensors take any DLPack producer (NumPy, PyTorch, ...) and share its memory when the device
reaches it (interp and cpu: host memory); they go back out through __dlpack__ (numpy.from_dlpack,
torch.from_dlpack). Every error is a cubecc.Error whose subclass is the runtime's kind. The guide
is docs/python.md.
"""

from . import _cubecc
from ._cubecc import (
    DeviceEntry,
    DeviceInfo,
    Event,
    Kernel,
    KernelLibrary,
    Runtime,
    Statistics,
    Stream,
    Tensor,
    devices,
    version,
)

__version__ = version()


class Error(Exception):
    """A failure of the cubecc runtime. `kind` names it as the runtime does."""

    kind = ""


class NoDeviceError(Error, RuntimeError):
    """The device asked for does not open (no driver, no GPU, backend not built)."""

    kind = "no device"


class OutOfMemoryError(Error, MemoryError):
    """The device, or the host for a host-memory device, ran out of memory."""

    kind = "out of memory"


class InvalidArgumentError(Error, ValueError):
    """The caller's mistake: a wrong argument (the message names the parameter), a call out of order."""

    kind = "invalid argument"


class NotFoundError(Error, LookupError):
    """A kernel, bundle entry or file that is not there (the message lists what there is)."""

    kind = "not found"


class CompileError(Error, RuntimeError):
    """A kernel that does not trace, verify or compile for the device."""

    kind = "compile"


class UnsupportedError(Error, RuntimeError):
    """Valid, but this device or build cannot do it (memory it cannot reach, a dtype it lacks)."""

    kind = "unsupported"


class EnvironmentBundleError(Error, RuntimeError):
    """An environment bundle that does not open, is damaged, unsigned, or (strict) lacks a kernel."""

    kind = "environment"


class DeviceFailureError(Error, RuntimeError):
    """The device failed while running work (a faulting kernel, a lost device)."""

    kind = "device failure"


class InternalError(Error, RuntimeError):
    """A bug in cubecc: the message says where."""

    kind = "internal"


_ERRORS = [
    NoDeviceError,
    OutOfMemoryError,
    InvalidArgumentError,
    NotFoundError,
    CompileError,
    UnsupportedError,
    EnvironmentBundleError,
    DeviceFailureError,
    InternalError,
]
if [e.kind for e in _ERRORS] != _cubecc._error_kinds():
    raise ImportError("cubecc: the error classes do not match the runtime's error kinds")
_cubecc._set_error_classes(_ERRORS)

__all__ = [
    "DeviceEntry",
    "DeviceInfo",
    "Event",
    "Kernel",
    "KernelLibrary",
    "Runtime",
    "Statistics",
    "Stream",
    "Tensor",
    "devices",
    "version",
    "Error",
    "NoDeviceError",
    "OutOfMemoryError",
    "InvalidArgumentError",
    "NotFoundError",
    "CompileError",
    "UnsupportedError",
    "EnvironmentBundleError",
    "DeviceFailureError",
    "InternalError",
]
