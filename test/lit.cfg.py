# lit configuration for cubecc's FileCheck tests: test/lit (golden tests of the IR, passes and
# tools) and test/error (inputs that must fail with a located message and exit code 1).
#
# Run through ctest, or by hand:
#   python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv --param tools_dir=build/tools test/lit test/error
import os

import lit.formats

config.name = "cubecc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".cir", ".test"]
config.excludes = ["unit", "fuzz", "utils", "Inputs", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)

tools_dir = lit_config.params.get("tools_dir")
if not tools_dir:
    lit_config.fatal("pass --param tools_dir=<build>/tools (the folder holding cubecc-opt)")
tools_dir = os.path.abspath(tools_dir)
llvm_bin = lit_config.params.get("llvm_bin", "/usr/lib/llvm-19/bin")
repo_root = os.path.dirname(config.test_source_root)
# Test outputs (%t) go beside the tools, never into the source tree.
config.test_exec_root = os.path.join(os.path.dirname(tools_dir), "lit-output")

config.environment["PATH"] = os.pathsep.join([tools_dir, llvm_bin, config.environment.get("PATH", os.environ.get("PATH", ""))])
# The cpu device caches compiled objects per user: the tests keep theirs beside their outputs,
# emptied at the start of every run.
import shutil
_cache = os.path.join(config.test_exec_root, "cubecc-cache")
shutil.rmtree(_cache, ignore_errors=True)
config.environment["CUBECC_CACHE_DIR"] = _cache
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# LLVM (the cpu backend's lld, hipRTC's compiler) replaces the signal stack of the thread that
# first registers its handlers with a larger one of its own, from malloc; ASan then fails to unmap
# it when that thread ends. ASan's own stack is SIGSTKSZ * 4, large enough to be kept only where
# the CPU's signal frame is large (AVX-512 and AMX machines), so the tests run without it.
if "use_sigaltstack" not in config.environment.get("ASAN_OPTIONS", ""):
    config.environment["ASAN_OPTIONS"] = config.environment.get("ASAN_OPTIONS", "") + ":use_sigaltstack=0"

# Longest names first: lit substitutes in order, and %cubecc is a prefix of %cubecc-opt.
config.substitutions.append(("%cubecc-opt", os.path.join(tools_dir, "cubecc-opt")))
config.substitutions.append(("%cubecc", os.path.join(tools_dir, "cubecc")))
config.substitutions.append(("%examples_lib", os.path.join(os.path.dirname(tools_dir), "examples", "libcubecc_examples.so")))
config.substitutions.append(("%run_examples", os.path.join(os.path.dirname(tools_dir), "examples", "run_examples")))
config.substitutions.append(("%bad_libraries", os.path.join(os.path.dirname(tools_dir), "test", "libraries")))
config.substitutions.append(("%expect-exit", os.path.join(config.test_source_root, "utils", "expect-exit")))
config.substitutions.append(("%repo", repo_root))

# The CUDA and HIP backends: features from what this cubecc found (`cubecc --version`), so that
# their tests run wherever the toolkits are and say UNSUPPORTED elsewhere.
import shutil
import subprocess

try:
    _version = subprocess.run([os.path.join(tools_dir, "cubecc"), "--version"], capture_output=True,
                              text=True, timeout=60).stdout
except (OSError, subprocess.SubprocessError):
    _version = ""
if "\nNVRTC " in _version and "NVRTC not available" not in _version:
    config.available_features.add("nvrtc")
if "\nhipRTC " in _version and "hipRTC not available" not in _version:
    config.available_features.add("hiprtc")
    # comgr of ROCm 5.0 to 5.2 knows no gfx94x (TOOLCHAIN.md): cubecc must refuse it.
    if any("hipRTC HIP 5.%d." % minor in _version for minor in (0, 1, 2)):
        config.available_features.add("comgr-without-gfx942")
_ptxas = shutil.which("ptxas") or next(
    (p for p in (os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin", "ptxas"),
                 "/usr/local/cuda/bin/ptxas") if os.path.exists(p)), None)
if _ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))
