"""Environment bundles from Python: kernels loaded with zero compiles, by library or by name, and
the signature policy. The bundle is built by the command-line tool shipped in the package."""

import numpy as np
import pytest

import cubecc

from conftest import DEVICES, run_cli, shares_host_memory


def target_of(backend):
    """The `cubecc env build --target` that serves this machine's device of `backend`."""
    if backend in ("interp", "vulkan"):
        return backend
    info = cubecc.Runtime(backend).device
    return f"{backend}:{info.arch}"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, examples_path):
    path = tmp_path_factory.mktemp("env") / "examples.cubeenv"
    targets = ",".join(target_of(d) for d in DEVICES)
    run_cli("env", "build", examples_path, "--target", targets, "-o", path)
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory, bundle):
    directory = tmp_path_factory.mktemp("keys")
    run_cli("env", "keygen", "-o", directory / "ci")
    signed = directory / "signed.cubeenv"
    run_cli("env", "sign", bundle, "--key", directory / "ci.key", "-o", signed)
    return signed, directory / "ci.pub"


@pytest.mark.parametrize("device", DEVICES)
def test_every_kernel_loads_from_the_bundle_with_zero_compiles(device, bundle, examples):
    rt = cubecc.Runtime(device)
    rt.use_environment(str(bundle), strict=True)
    for name, configuration in examples.kernels:
        rt.kernel(examples, name, configuration)
    stats = rt.statistics()
    assert stats.compiles == 0
    assert stats.environment_hits == len(examples.kernels)
    assert stats.environment_misses == 0 and stats.environment_rejected == 0
    axpy = rt.kernel(examples, "axpy")
    x, y = np.arange(512, dtype=np.float32), np.ones(512, dtype=np.float32)
    want = np.float32(0.5) * x + y  # before the launch: on interp and cpu, y is shared
    ty = rt.tensor(y)
    rt.launch(axpy, axpy.grid_for(512), rt.tensor(x), ty, 0.5)
    np.testing.assert_array_equal(ty.numpy(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_kernels_by_name_without_the_library(device, bundle):
    rt = cubecc.Runtime(device)
    rt.use_environment(str(bundle), strict=True)
    mm = rt.kernel_from_environment("cubecc_examples", "matmul_16x16x16", "tm=16,tn=16,tk=16")
    assert mm.signature == "matmul_16x16x16(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2])"
    a = np.eye(16, dtype=np.float32) * 3
    b = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    c = rt.empty((16, 32))
    rt.launch(mm, mm.grid_for(32, 16), rt.tensor(a), rt.tensor(b), c)
    np.testing.assert_array_equal(c.numpy(), 3 * b)
    assert rt.statistics().compiles == 0
    with pytest.raises(cubecc.NotFoundError, match="softmax_v2"):
        rt.kernel_from_environment("cubecc_examples", "softmax_v2")
    if shares_host_memory(rt):
        # The bundle records which parameters the kernel never reads: axpy's x[i] ignores x's
        # strides, so a strided view is refused here too, without the library.
        axpy = rt.kernel_from_environment("cubecc_examples", "axpy", "width=1")
        strided = np.arange(64, dtype=np.float32)[::2]
        with pytest.raises(cubecc.InvalidArgumentError, match="flat position alone"):
            rt.launch(axpy, 1, strided, np.ones(32, np.float32), 1.0)


def test_strict_bundle_refuses_a_kernel_it_does_not_hold(tmp_path, examples, examples_path):
    small = tmp_path / "axpy-only.cubeenv"
    # A bundle for another target: it holds no binary for interp.
    run_cli("env", "build", examples_path, "--target", "vulkan", "-o", small)
    rt = cubecc.Runtime("interp")
    rt.use_environment(str(small), strict=True)
    with pytest.raises(cubecc.EnvironmentBundleError):
        rt.kernel(examples, "axpy")
    lenient = cubecc.Runtime("interp")
    lenient.use_environment(str(small))
    lenient.kernel(examples, "axpy")  # compiled instead
    assert lenient.statistics().compiles == 1


def test_a_damaged_bundle_is_refused_when_strict(tmp_path, bundle):
    damaged = tmp_path / "damaged.cubeenv"
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data[: len(data) - 7]))
    with pytest.raises(cubecc.EnvironmentBundleError, match="damaged.cubeenv"):
        cubecc.Runtime("interp").use_environment(str(damaged), strict=True)


def test_signed_bundles_and_trusted_keys(keys, examples):
    signed, public_key = keys
    rt = cubecc.Runtime("interp")
    rt.use_environment(str(signed), strict=True, trusted_keys=[str(public_key)])
    rt.kernel(examples, "softmax")
    assert rt.statistics().environment_hits == 1 and rt.statistics().compiles == 0
    hex_key = [l for l in public_key.read_text().splitlines() if not l.startswith("#")][0].strip()
    other = cubecc.Runtime("interp")
    other.use_environment(str(signed), strict=True, trusted_keys=[hex_key])


def test_unsigned_or_untrusted_bundles_are_refused(keys, bundle, tmp_path):
    signed, _ = keys
    run_cli("env", "keygen", "-o", tmp_path / "stranger")
    with pytest.raises(cubecc.EnvironmentBundleError):
        cubecc.Runtime("interp").use_environment(str(bundle), strict=True, require_signature=True)
    with pytest.raises(cubecc.EnvironmentBundleError):
        cubecc.Runtime("interp").use_environment(
            str(signed), strict=True, trusted_keys=[str(tmp_path / "stranger.pub")])
