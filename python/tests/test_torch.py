"""PyTorch tensors in and out through DLPack (torch is a test-only dependency)."""

import numpy as np
import pytest

import cubecc

from conftest import shares_host_memory

torch = pytest.importorskip("torch")


def test_torch_tensors_in_and_out(runtime, examples):
    axpy = runtime.kernel(examples, "axpy")
    x = torch.linspace(-1, 1, 3000, dtype=torch.float32)
    y = torch.ones(3000, dtype=torch.float32)
    want = 2 * x + y
    tx, ty = runtime.tensor(x), runtime.tensor(y)
    shared = shares_host_memory(runtime)
    assert (ty.data_ptr == y.data_ptr()) == shared
    runtime.launch(axpy, axpy.grid_for(3000), tx, ty, 2.0)
    runtime.synchronize()
    if shared:
        assert torch.equal(y, want)  # written in place: torch's memory
        back = torch.from_dlpack(ty)
        assert back.data_ptr() == y.data_ptr()
    np.testing.assert_array_equal(ty.numpy(), want.numpy())


def test_torch_tensors_straight_into_a_launch(interp, examples):
    mm = interp.kernel(examples, "matmul_16x16x16")
    a = torch.randn(32, 16, dtype=torch.float32)
    b = torch.randn(16, 48, dtype=torch.float32)
    c = torch.zeros(32, 48, dtype=torch.float32)
    interp.launch(mm, mm.grid_for(48, 32), a, b, c)
    interp.synchronize()
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=0, atol=16 * 2**-22)


def test_torch_views_keep_their_strides(interp):
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    view = base[:, 2:7]  # strides (10, 1), offset 2
    t = interp.from_dlpack(view)
    assert t.shape == (6, 5)
    assert t.strides == (10, 1)
    np.testing.assert_array_equal(t.numpy(), view.numpy())


def test_cubecc_tensors_become_torch_tensors_on_host_devices(interp):
    t = interp.tensor(np.arange(12, dtype=np.int64).reshape(3, 4), copy=True)
    shared = torch.from_dlpack(t)
    assert shared.data_ptr() == t.data_ptr
    assert shared.dtype == torch.int64 and tuple(shared.shape) == (3, 4)
    shared[1, 2] = -7  # the same memory
    assert t.numpy()[1, 2] == -7


def test_bfloat16_crosses_dlpack_with_torch(interp):
    x = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
    t = interp.tensor(x)
    assert t.dtype == "bf16"
    assert torch.equal(torch.from_dlpack(t), x)


def test_unsupported_torch_dtypes(interp):
    with pytest.raises(cubecc.UnsupportedError):
        interp.tensor(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(cubecc.UnsupportedError):
        interp.tensor(torch.ones(3, dtype=torch.bool))
