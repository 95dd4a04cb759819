"""Devices, runtimes, kernels and their signatures."""

import pytest

import cubecc

from conftest import DEVICES


def test_devices_lists_every_backend_and_the_ones_present():
    entries = cubecc.devices()
    backends = [e.backend for e in entries]
    for backend in ("interp", "vulkan"):
        assert backend in backends
        assert backend in DEVICES, f"{backend} should open here: {entries}"
    for e in entries:
        assert e.available == (e.info is not None)
        if not e.available:
            assert e.detail, "a missing device says why"


def test_runtime_reports_its_device(runtime):
    info = runtime.device
    assert info.backend in DEVICES
    assert info.name
    assert info.device_class in ("GPU", "CPU", "software")
    assert info.max_buffer_bytes > 0
    assert repr(runtime).startswith("<cubecc.Runtime " + info.backend)


def test_a_device_that_is_not_there_raises_no_device_error():
    missing = [e for e in cubecc.devices() if not e.available]
    if not missing:
        pytest.skip("every backend has a device here")
    with pytest.raises(cubecc.NoDeviceError) as raised:
        cubecc.Runtime(missing[0].backend)
    assert raised.value.kind == "no device"
    assert missing[0].backend in str(raised.value)


def test_an_unknown_device_name_is_an_error():
    with pytest.raises(cubecc.Error) as raised:
        cubecc.Runtime("tpu")
    assert "tpu" in str(raised.value)


def test_errors_are_python_exceptions_of_the_runtime_kinds():
    assert issubclass(cubecc.InvalidArgumentError, ValueError)
    assert issubclass(cubecc.NotFoundError, LookupError)
    assert issubclass(cubecc.OutOfMemoryError, MemoryError)
    for cls in (cubecc.NoDeviceError, cubecc.CompileError, cubecc.UnsupportedError,
                cubecc.EnvironmentBundleError, cubecc.DeviceFailureError, cubecc.InternalError):
        assert issubclass(cls, cubecc.Error) and issubclass(cls, RuntimeError)
        assert cls.kind


def test_library_lists_its_kernels(examples):
    names = [name for name, _ in examples.kernels]
    assert "axpy" in names and "matmul_16x16x16" in names
    assert dict(examples.kernels)["axpy"] == "width=1"


def test_kernel_signature_groups_the_dsl_parameters(interp, examples):
    axpy = interp.kernel(examples, "axpy")
    assert axpy.name == "axpy"
    assert axpy.signature == "axpy(x: Tensor[f32, 1], y: Tensor[f32, 1], a: f32)"
    assert axpy.parameters == ["x: Tensor[f32, 1]", "y: Tensor[f32, 1]", "a: f32"]
    assert axpy.workgroup_size == (256, 1, 1)
    assert axpy.grid_for(1000) == (4, 1, 1)
    mm = interp.kernel(examples, "matmul_16x16x16")
    assert mm.signature == "matmul_16x16x16(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2])"
    assert mm.grid_for(64, 32) == (4, 2, 1)


def test_kernel_by_path_and_by_configuration(interp, examples_path):
    k = interp.kernel(examples_path, "axpy_w4", "width=4")
    assert k.name == "axpy_w4"


def test_a_second_request_is_a_cache_hit(interp, examples):
    interp.kernel(examples, "reduce_max")
    before = interp.statistics()
    interp.kernel(examples, "reduce_max")
    after = interp.statistics()
    assert after.compiles == before.compiles
    assert after.kernel_cache_hits == before.kernel_cache_hits + 1


def test_unknown_kernel_names_what_the_library_has(interp, examples):
    with pytest.raises(cubecc.NotFoundError) as raised:
        interp.kernel(examples, "saxpy")
    assert "saxpy" in str(raised.value) and "axpy" in str(raised.value)
    with pytest.raises(cubecc.NotFoundError):
        interp.kernel(examples, "axpy", "width=7")


def test_a_library_that_does_not_load_names_the_file(tmp_path):
    bogus = tmp_path / "libnot_a_library.so"
    bogus.write_bytes(b"\x7fELF garbage")
    with pytest.raises(cubecc.NotFoundError) as raised:
        cubecc.KernelLibrary(str(bogus))
    assert str(bogus) in str(raised.value)
    with pytest.raises(cubecc.NotFoundError):
        cubecc.KernelLibrary(str(tmp_path / "missing.so"))


def test_statistics_count_pool_memory(interp):
    before = interp.statistics()
    t = interp.empty((1024,), "f32")
    during = interp.statistics()
    assert during.pool_bytes_live >= before.pool_bytes_live + 4096
    assert during.pool_allocations == before.pool_allocations + 1
    del t
    assert interp.statistics().pool_bytes_live == before.pool_bytes_live


def test_version_and_the_command_line_tool():
    from conftest import run_cli

    assert cubecc.__version__ == cubecc.version()
    out = run_cli("--version").stdout
    assert cubecc.version() in out


def test_type_stubs_are_shipped():
    import pathlib

    stub = pathlib.Path(cubecc.__file__).parent / "_cubecc.pyi"
    text = stub.read_text()
    for name in ("class Runtime", "def launch", "class Tensor", "def __dlpack__", "def devices"):
        assert name in text, f"{name} missing from {stub}"
