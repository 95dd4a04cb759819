"""Every error path of the Python API: each raises the runtime's kind and names what is wrong."""

import numpy as np
import pytest

import cubecc


@pytest.fixture(scope="module")
def axpy(interp, examples):
    return interp.kernel(examples, "axpy")


@pytest.fixture(scope="module")
def x(interp):
    return interp.tensor(np.ones(256, dtype=np.float32))


def test_wrong_argument_count_shows_the_signature(interp, axpy, x):
    with pytest.raises(cubecc.InvalidArgumentError) as raised:
        interp.launch(axpy, 1, x, x)
    assert "2 argument(s) given" in str(raised.value)
    assert "axpy(x: Tensor[f32, 1], y: Tensor[f32, 1], a: f32)" in str(raised.value)


def test_wrong_element_type_names_the_parameter(interp, axpy, x):
    y = interp.empty(256, "f64")
    with pytest.raises(cubecc.InvalidArgumentError, match=r"argument 1 \(y: Tensor\[f32, 1\]\).*f64"):
        interp.launch(axpy, 1, x, y, 1.0)


def test_wrong_rank_names_the_parameter(interp, axpy, x):
    y = interp.empty((16, 16))
    with pytest.raises(cubecc.InvalidArgumentError, match=r"\(y: Tensor\[f32, 1\]\): .*1 dimension"):
        interp.launch(axpy, 1, x, y, 1.0)


def test_value_for_a_tensor_and_tensor_for_a_value(interp, axpy, x):
    with pytest.raises(cubecc.InvalidArgumentError, match=r"argument 0 \(x: .*a float is not a tensor"):
        interp.launch(axpy, 1, 1.5, x, 1.0)
    with pytest.raises(cubecc.InvalidArgumentError, match=r"argument 2 \(a: f32\): needs a number, got a Tensor"):
        interp.launch(axpy, 1, x, x, x)
    with pytest.raises(cubecc.InvalidArgumentError, match=r"needs a number, got a str"):
        interp.launch(axpy, 1, x, x, "2.0")


def test_integers_beyond_64_bits(interp, axpy, x):
    with pytest.raises(cubecc.InvalidArgumentError, match=r"\(a: f32\): .*does not fit 64 bits"):
        interp.launch(axpy, 1, x, x, 2**70)
    with pytest.raises(cubecc.InvalidArgumentError, match="does not fit 64 bits"):
        interp.launch(axpy, 1, x, x, -(2**64))


def test_grid_errors(interp, axpy, x):
    for grid, message in [(0, "1 to 2"), ((1, 2, 3, 4), "4 axes"), ("1", "int or a tuple"),
                          ((1, -1), "axis 1"), (2**32, "1 to 2"), ((1.5,), "not an integer")]:
        with pytest.raises(cubecc.InvalidArgumentError, match=message):
            interp.launch(axpy, grid, x, x, 1.0)


def test_tensors_and_kernels_of_another_runtime(interp, examples, axpy):
    other = cubecc.Runtime("interp")
    theirs = other.tensor(np.ones(256, dtype=np.float32))
    ours = interp.tensor(np.ones(256, dtype=np.float32))
    with pytest.raises(cubecc.InvalidArgumentError, match="belongs to another Runtime"):
        interp.launch(axpy, 1, theirs, ours, 1.0)
    with pytest.raises(cubecc.InvalidArgumentError, match="loaded on another Runtime"):
        other.launch(axpy, 1, theirs, theirs, 1.0)
    with pytest.raises(cubecc.InvalidArgumentError, match="another Runtime"):
        interp.tensor(theirs)
    copied = interp.tensor(theirs, copy=True)
    np.testing.assert_array_equal(copied.numpy(), np.ones(256, dtype=np.float32))


def test_bad_shapes_and_dtypes(interp):
    with pytest.raises(cubecc.InvalidArgumentError, match="at least 1"):
        interp.empty((4, 0))
    with pytest.raises(cubecc.InvalidArgumentError, match="1 to 8 dimensions"):
        interp.empty((1,) * 9)
    with pytest.raises(cubecc.InvalidArgumentError, match="unknown dtype 'complex64'"):
        interp.empty(4, np.complex64)
    with pytest.raises(cubecc.InvalidArgumentError, match="int or a tuple"):
        interp.empty("four")
    assert interp.empty(4, np.dtype("int16")).dtype == "i16"
    assert interp.empty(4, np.uint8).dtype == "u8"
    assert interp.empty(4, "bfloat16").dtype == "bf16"


def test_dlpack_inputs_cubecc_cannot_hold(interp):
    with pytest.raises(cubecc.UnsupportedError, match="no cubecc element type|dtype"):
        interp.tensor(np.ones(4, dtype=np.complex64))
    with pytest.raises(cubecc.InvalidArgumentError, match="not a tensor"):
        interp.tensor([1.0, 2.0])
    with pytest.raises(cubecc.InvalidArgumentError):
        interp.tensor(np.ones((0,), dtype=np.float32))
    reversed_view = np.arange(8, dtype=np.float32)[::-1]
    with pytest.raises(cubecc.UnsupportedError, match="negative stride"):
        interp.from_dlpack(reversed_view)
    np.testing.assert_array_equal(interp.tensor(reversed_view).numpy(), reversed_view)  # a copy


def test_numpy_has_no_bfloat16(interp):
    with pytest.raises(cubecc.UnsupportedError, match="NumPy has no bf16"):
        interp.empty(4, "bf16").numpy()


def test_views_out_of_range(interp):
    t = interp.empty((4, 6))
    with pytest.raises(cubecc.InvalidArgumentError, match="dimension 2"):
        t.transpose(0, 2)
    with pytest.raises(cubecc.InvalidArgumentError, match=r"\[3, 9\)"):
        t.slice(1, 3, 9)


def test_kernel_from_environment_needs_an_environment(interp):
    with pytest.raises(cubecc.InvalidArgumentError):
        interp.kernel_from_environment("examples", "axpy", "width=1")


def test_missing_bundle(tmp_path):
    rt = cubecc.Runtime("interp")
    rt.use_environment(str(tmp_path / "missing.cubeenv"))  # a warning: compiles as without one
    with pytest.raises(cubecc.EnvironmentBundleError, match="missing.cubeenv"):
        rt.use_environment(str(tmp_path / "missing.cubeenv"), strict=True)


def test_a_library_argument_that_is_neither(interp):
    with pytest.raises(cubecc.InvalidArgumentError, match="KernelLibrary or a path"):
        interp.kernel(42, "axpy")


class FakeProducer:
    """A hostile or broken DLPack producer."""

    def __init__(self, result):
        self.result = result

    def __dlpack__(self, **kwargs):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_broken_dlpack_producers_raise_never_crash(interp, axpy, x):
    import ctypes

    bogus = ctypes.pythonapi.PyCapsule_New
    bogus.restype, bogus.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    for result, kind in [(42, cubecc.UnsupportedError),
                         (bogus(ctypes.c_void_p(1), b"something_else", None), cubecc.UnsupportedError)]:
        with pytest.raises(kind, match="no \"dltensor\" capsule"):
            interp.tensor(FakeProducer(result))
    with pytest.raises(ZeroDivisionError):  # the producer's own exception, unchanged
        interp.tensor(FakeProducer(ZeroDivisionError("producer failed")))
    with pytest.raises(cubecc.UnsupportedError, match=r"argument 1 \(y: Tensor\[f32, 1\]\)"):
        interp.launch(axpy, 1, x, FakeProducer(7), 1.0)


def test_a_read_only_numpy_array_is_numpys_refusal(interp):
    frozen = np.ones(8, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(BufferError):  # NumPy does not export read-only arrays through DLPack 0.x
        interp.tensor(frozen)
    np.testing.assert_array_equal(interp.tensor(frozen.copy()).numpy(), frozen)


def test_grid_for_errors(axpy):
    for bad in (-1, 1.5, "8", 2**70, True):
        with pytest.raises(cubecc.InvalidArgumentError, match="grid_for"):
            axpy.grid_for(bad)
    with pytest.raises(cubecc.InvalidArgumentError, match="1 to 3 axes"):
        axpy.grid_for(1, 2, 3, 4)
    with pytest.raises(cubecc.InvalidArgumentError, match="more than a launch can have"):
        axpy.grid_for(2**45)
    assert axpy.grid_for(np.int64(1000), np.uint32(3)) == (4, 3, 1)


def test_dlpack_strides_that_reach_past_memory_are_refused_before_a_read(interp):
    """A producer's strides are untrusted: a copy whose farthest element lies 2^63 bytes away is
    refused by name, never gathered (the offset arithmetic would overflow)."""
    import ctypes

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                    ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                    ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", ctypes.c_void_p)]  # NULL: nothing to free (DLPack allows it)

    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    data = (ctypes.c_float * 4)(1, 2, 3, 4)
    keep = []

    def producer(shape, strides, byte_offset=0):
        shape_a = (ctypes.c_int64 * len(shape))(*shape)
        strides_a = (ctypes.c_int64 * len(strides))(*strides)
        managed = DLManagedTensor(DLTensor(ctypes.cast(data, ctypes.c_void_p), 1, 0, len(shape),
                                           2, 32, 1, shape_a, strides_a, byte_offset), None, None)
        keep.extend([shape_a, strides_a, managed])
        return FakeProducer(new_capsule(ctypes.addressof(managed), b"dltensor", None))

    for shape, strides, offset in [((2, 2), (2**62, 1), 0), ((2,), (-(2**63),), 0),
                                   ((3, 2), (2**61, 2**61), 0), ((2,), (1,), 2**63)]:
        with pytest.raises(cubecc.InvalidArgumentError, match="reach past 2\\^63 bytes"):
            interp.tensor(producer(shape, strides, offset), copy=True)
    # The same producer with sound strides is copied: a transposed 2x2 view.
    np.testing.assert_array_equal(interp.tensor(producer((2, 2), (1, 2)), copy=True).numpy(),
                                  [[1, 3], [2, 4]])
