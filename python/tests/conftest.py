"""Fixtures of the Python package's tests (run by scripts/test.sh; docs/python.md).

The tests import the installed package (pip install ./python) and use the example kernel
library of the cubecc tree the package was built from: $CUBECC_BUILD_DIR, else build/.
"""

import os
import pathlib
import subprocess
import sys

import pytest

import cubecc

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
BUILD_DIR = pathlib.Path(os.environ.get("CUBECC_BUILD_DIR") or REPOSITORY / "build")
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPOSITORY / BUILD_DIR
EXAMPLES = BUILD_DIR / "examples" / "libcubecc_examples.so"

# Every device present here, by name: interp and vulkan always (CI has lavapipe), cpu, cuda and
# hip where they open.
DEVICES = [d.backend for d in cubecc.devices() if d.available]


@pytest.fixture(scope="session")
def examples_path():
    if not EXAMPLES.exists():
        pytest.fail(f"the example kernel library {EXAMPLES} is missing: build the tree first")
    return str(EXAMPLES)


@pytest.fixture(scope="session")
def examples(examples_path):
    return cubecc.KernelLibrary(examples_path)


@pytest.fixture(scope="session", params=DEVICES)
def runtime(request):
    """One Runtime per device present, shared by the tests of a session (as an application would)."""
    return cubecc.Runtime(request.param)


@pytest.fixture(scope="session")
def interp():
    return cubecc.Runtime("interp")


def shares_host_memory(rt):
    """Whether the device runs on host memory that DLPack producers can lend it (interp, cpu)."""
    return rt.device.backend in ("interp", "cpu")


def run_cli(*args, check=True):
    """`python -m cubecc ARGS`: the command-line tool shipped in the package."""
    result = subprocess.run(
        [sys.executable, "-m", "cubecc", *map(str, args)], capture_output=True, text=True
    )
    if check and result.returncode != 0:
        raise AssertionError(f"cubecc {' '.join(map(str, args))} failed:\n{result.stdout}{result.stderr}")
    return result
