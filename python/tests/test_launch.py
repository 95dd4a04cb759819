"""The example kernels launched from Python on every device present, against NumPy references."""

import numpy as np
import pytest

import cubecc

from conftest import shares_host_memory

rng = np.random.default_rng(2026)


def floats(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_axpy_matches_numpy_bit_for_bit(runtime, examples):
    axpy = runtime.kernel(examples, "axpy")
    x, y = floats(5000), floats(5000)
    want = np.float32(2.0) * x + y  # before the launch: on interp and cpu, y is shared
    tx, ty = runtime.tensor(x), runtime.tensor(y)
    runtime.launch(axpy, axpy.grid_for(5000), tx, ty, 2.0)
    np.testing.assert_array_equal(ty.numpy(), want)


def test_integer_for_a_float_parameter_is_converted_exactly(runtime, examples):
    axpy = runtime.kernel(examples, "axpy")
    x, y = floats(300), floats(300)
    want = np.float32(3) * x + y
    ty = runtime.tensor(y)
    runtime.launch(axpy, axpy.grid_for(300), runtime.tensor(x), ty, 3)
    np.testing.assert_array_equal(ty.numpy(), want)
    with pytest.raises(cubecc.InvalidArgumentError, match="exact double"):
        runtime.launch(axpy, 2, runtime.tensor(x), ty, 2**60 + 1)


def test_numpy_scalars_are_values(runtime, examples):
    axpy = runtime.kernel(examples, "axpy")
    x, y = floats(256), floats(256)
    want = np.float32(0.5) * x + y
    ty = runtime.tensor(y)
    runtime.launch(axpy, 1, runtime.tensor(x), ty, np.float32(0.5))
    np.testing.assert_array_equal(ty.numpy(), want)


def test_matmul_on_two_dimensional_tensors(runtime, examples):
    mm = runtime.kernel(examples, "matmul_16x16x16")
    m, k, n = 48, 32, 64
    a, b = floats(m, k), floats(k, n)
    c = runtime.empty((m, n), "f32")
    runtime.launch(mm, mm.grid_for(n, m), runtime.tensor(a), runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b, rtol=0, atol=k * 2**-22)
    assert c.shape == (m, n) and c.strides == (n, 1) and c.dtype == "f32"


def test_softmax_rows(runtime, examples):
    softmax = runtime.kernel(examples, "softmax")
    rows, cols = 12, 300
    x = floats(rows, cols) * 20
    out = runtime.empty((rows, cols), np.float32)
    runtime.launch(softmax, rows, runtime.tensor(x), out)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), want, rtol=(cols + 32) * 2**-24, atol=1e-30)


def test_reduce_sum_in_two_launches(runtime, examples):
    reduce_sum = runtime.kernel(examples, "reduce_sum")
    x = floats(1 << 14)
    partial, total = runtime.empty(8), runtime.empty(1)
    runtime.launch(reduce_sum, 8, runtime.tensor(x), partial)
    runtime.launch(reduce_sum, 1, partial, total)
    exact = x.astype(np.float64).sum()
    assert abs(total.numpy()[0] - exact) <= x.size * 2**-24 * np.abs(x).sum()


def test_histogram_of_unsigned_integers(runtime, examples):
    histogram = runtime.kernel(examples, "histogram_256")
    values = rng.integers(0, 300, size=8192, dtype=np.uint32)
    hist = runtime.tensor(np.zeros(256, dtype=np.uint32))
    runtime.launch(histogram, 4, runtime.tensor(values), hist)
    want = np.bincount(values[values < 256], minlength=256).astype(np.uint32)
    np.testing.assert_array_equal(hist.numpy(), want)


def test_prefix_sum_per_block(runtime, examples):
    scan = runtime.kernel(examples, "prefix_sum_u32")
    values = rng.integers(0, 1000, size=4096, dtype=np.uint32)
    out, sums = runtime.empty(4096, "u32"), runtime.empty(16, "u32")
    runtime.launch(scan, 16, runtime.tensor(values), out, sums)
    blocks = values.reshape(16, 256)
    np.testing.assert_array_equal(out.numpy(), np.cumsum(blocks, axis=1, dtype=np.uint32).ravel())
    np.testing.assert_array_equal(sums.numpy(), blocks.sum(axis=1, dtype=np.uint32))


def test_transpose_with_partial_tiles(runtime, examples):
    transpose = runtime.kernel(examples, "transpose_32x8")
    rows, cols = 100, 70
    x = floats(rows, cols)
    out = runtime.empty((cols, rows))
    runtime.launch(transpose, ((cols + 31) // 32, (rows + 31) // 32), runtime.tensor(x), out)
    np.testing.assert_array_equal(out.numpy(), x.T)


def test_strided_views_reach_the_kernel(runtime, examples):
    """A transposed view passes its strides: the kernel reads the same elements NumPy does."""
    transpose = runtime.kernel(examples, "transpose_32x8")
    x = floats(40, 24)
    view = runtime.tensor(x).transpose(0, 1)  # 24 x 40, strides (1, 24)
    assert view.shape == (24, 40) and view.strides == (1, 24) and not view.contiguous
    out = runtime.empty((40, 24))
    runtime.launch(transpose, (2, 1), view, out)
    np.testing.assert_array_equal(out.numpy(), x)
    np.testing.assert_array_equal(view.numpy(), x.T)
    rows = runtime.tensor(x).slice(0, 10, 20)
    assert rows.offset == 240
    np.testing.assert_array_equal(rows.numpy(), x[10:20])


def test_a_kernel_that_ignores_strides_takes_contiguous_tensors_only(runtime, examples):
    """axpy reads x[i], never x's strides: a strided view would be read as if it were dense (the
    storage's first elements, not NumPy's), so the launch refuses one; a copy gives NumPy's result.
    """
    axpy = runtime.kernel(examples, "axpy")
    big, y = floats(2000), floats(1000)
    want = np.float32(2.0) * big[::2] + y
    tx, ty = runtime.tensor(big[::2]), runtime.tensor(y)
    if not tx.contiguous:  # the device shares host memory: the view kept its stride
        assert tx.strides == (2,)
        for x in (tx, big[::2]):
            with pytest.raises(cubecc.InvalidArgumentError, match="flat position alone"):
                runtime.launch(axpy, axpy.grid_for(1000), x, ty, 2.0)
        tx = runtime.tensor(big[::2], copy=True)
    runtime.launch(axpy, axpy.grid_for(1000), tx, ty, 2.0)
    np.testing.assert_array_equal(ty.numpy(), want)


def test_streams_and_events(runtime, examples):
    axpy = runtime.kernel(examples, "axpy")
    x, y = floats(1024), floats(1024)
    want = (x + y) + x
    tx, ty = runtime.tensor(x), runtime.tensor(y)
    runtime.synchronize()  # the copies, before another stream uses the tensors
    stream = runtime.create_stream()
    stream.launch(axpy, 4, tx, ty, 1.0)
    done = stream.record()
    stream.launch(axpy, 4, tx, ty, 1.0)
    done.synchronize()
    stream.synchronize()
    assert done.done
    np.testing.assert_array_equal(ty.numpy(), want)


def test_host_devices_share_numpy_memory_without_copies(runtime, examples):
    x, y = floats(2048), floats(2048)
    want = np.float32(2) * x + y
    axpy = runtime.kernel(examples, "axpy")
    if not shares_host_memory(runtime):
        ty = runtime.tensor(y)
        assert ty.data_ptr != y.ctypes.data  # copied to the device
        with pytest.raises(cubecc.UnsupportedError, match="copies it to the device"):
            runtime.from_dlpack(y)
        with pytest.raises(cubecc.UnsupportedError, match=r"argument 1 \(y: Tensor\[f32, 1\]\)"):
            runtime.launch(axpy, 8, runtime.tensor(x), y, 2.0)
        return
    tx, ty = runtime.tensor(x), runtime.tensor(y)
    assert tx.data_ptr == x.ctypes.data and ty.data_ptr == y.ctypes.data
    runtime.launch(axpy, axpy.grid_for(2048), tx, ty, 2.0)
    runtime.synchronize()
    np.testing.assert_array_equal(y, want)  # written in place: the memory is NumPy's
    # NumPy arrays straight into a launch: adopted for the launch, no copy.
    y2 = floats(2048)
    want2 = np.float32(2) * x + y2
    runtime.launch(axpy, axpy.grid_for(2048), x, y2, 2.0)
    runtime.synchronize()
    np.testing.assert_array_equal(y2, want2)
    # And back out through DLPack: the same memory again.
    back = np.from_dlpack(ty)
    assert back.ctypes.data == y.ctypes.data
    np.testing.assert_array_equal(back, want)


def test_the_producer_is_kept_alive_by_the_tensor(interp):
    x = floats(4096)
    pointer = x.ctypes.data
    t = interp.tensor(x)
    del x  # the tensor holds NumPy's capsule; the memory stays
    assert t.data_ptr == pointer
    assert t.numpy().shape == (4096,)


def test_copies_from_strided_and_reversed_numpy_arrays(runtime):
    x = floats(30, 20)
    for view in (x[:, ::2], x[::-1], x.T):
        t = runtime.tensor(view, copy=True)
        assert t.contiguous
        np.testing.assert_array_equal(t.numpy(), view)


def test_dtypes_round_trip(runtime):
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                  np.uint64, np.float16, np.float32, np.float64):
        x = (np.arange(100) % 50).astype(dtype)
        t = runtime.tensor(x, copy=True)
        assert t.dtype == cubecc_name(dtype)
        np.testing.assert_array_equal(t.numpy(), x)


def cubecc_name(dtype):
    kind = {"i": "i", "u": "u", "f": "f"}[np.dtype(dtype).kind]
    return f"{kind}{np.dtype(dtype).itemsize * 8}"


def test_launch_times_are_reported(runtime, examples):
    axpy = runtime.kernel(examples, "axpy")
    t = runtime.empty(256)
    runtime.launch(axpy, 1, t, t, 1.0)
    runtime.synchronize()
    times = runtime.last_launch_times_ns()
    assert len(times) >= 1 and all(v >= 0 for v in times)


def test_dlpack_export_names_the_device_memory(runtime):
    t = runtime.tensor(floats(64), copy=True)
    kinds = {"interp": 1, "cpu": 1, "cuda": 2, "hip": 10, "vulkan": 7}  # DLPack device types
    assert t.__dlpack_device__() == (kinds[runtime.device.backend], 0)
    capsule = t.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    del capsule  # never consumed: its destructor gives the tensor back
    np.testing.assert_array_equal(t.numpy().shape, (64,))


def test_threads_share_a_runtime(runtime, examples):
    """Python threads launching on one Runtime (the GIL is released while it works), each with
    its own NumPy arrays adopted and let go launch after launch, and one stream per thread."""
    import threading

    axpy = runtime.kernel(examples, "axpy")
    errors = []

    def work(seed):
        try:
            local = np.random.default_rng(seed)
            stream = runtime.create_stream()
            for i in range(20):
                x = local.standard_normal(512, dtype=np.float32)
                y = local.standard_normal(512, dtype=np.float32)
                want = np.float32(2) * x + y
                ty = runtime.tensor(y)
                tx = runtime.tensor(x)
                if i % 2:
                    runtime.synchronize()  # the copies (default stream), before another stream
                    stream.launch(axpy, 2, tx, ty, 2.0)
                    stream.synchronize()
                else:
                    runtime.launch(axpy, 2, tx, ty, 2.0)
                np.testing.assert_array_equal(ty.numpy(), want)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_stream_tensors_are_ordered_on_their_stream(runtime, examples):
    """Tensors allocated and copied on a stream need no other synchronization before its work."""
    axpy = runtime.kernel(examples, "axpy")
    stream = runtime.create_stream()
    x, y = floats(700), floats(700)
    want = np.float32(3) * x + y
    tx, ty = stream.tensor(x), stream.tensor(y)
    stream.launch(axpy, axpy.grid_for(700), tx, ty, 3.0)
    twice = stream.empty(700)
    assert twice.shape == (700,) and twice.dtype == "f32"
    stream.launch(axpy, axpy.grid_for(700), ty, ty, 1.0)  # ty = ty + ty, after the first
    stream.synchronize()
    np.testing.assert_array_equal(ty.numpy(), want + want)
    with pytest.raises(cubecc.InvalidArgumentError, match="already on the device"):
        stream.tensor(tx)


def test_numpy_asarray_copies_a_tensor(runtime):
    x = floats(3, 5)
    t = runtime.tensor(x, copy=True)
    np.testing.assert_array_equal(np.asarray(t), x)
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), x.astype(np.float64))
    with pytest.raises(cubecc.UnsupportedError, match="copy=False"):
        np.asarray(t, copy=False)
