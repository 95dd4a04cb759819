"""Runs example kernels from Python on the default device, every one loaded from a signed
environment bundle: the Python side of scripts/demo.sh (docs/python.md).

    python run_from_bundle.py BUNDLE LIBRARY PUBLIC_KEY

Loads every kernel of the kernel library LIBRARY from BUNDLE (strict: nothing may be compiled;
signed: only with PUBLIC_KEY trusted), runs axpy, matmul and softmax on NumPy arrays, checks them
against NumPy, prints a line per kernel and the runtime's statistics. Exits 1 when a result is
wrong or a kernel was compiled.
"""

import sys
import time

import numpy as np

import cubecc


def main(bundle, library_path, public_key):
    start = time.perf_counter()
    rt = cubecc.Runtime()
    rt.use_environment(bundle, strict=True, trusted_keys=[public_key])
    library = cubecc.KernelLibrary(library_path)
    kernels = {name: rt.kernel(library, name, configuration) for name, configuration in library.kernels}
    print(f"device: {rt.device.backend} ({rt.device.name}); {len(kernels)} kernels loaded in "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms")
    rng = np.random.default_rng(1)
    ok = True

    def report(name, good, detail):
        nonlocal ok
        ok &= bool(good)
        print(f"  {name:18} {'ok' if good else 'WRONG':6} {detail}")

    x, y = rng.standard_normal(1 << 16, dtype=np.float32), rng.standard_normal(1 << 16, dtype=np.float32)
    want = np.float32(2) * x + y
    ty = rt.tensor(y)
    rt.launch(kernels["axpy"], kernels["axpy"].grid_for(x.size), rt.tensor(x), ty, 2.0)
    report("axpy", np.array_equal(ty.numpy(), want), "n = 2^16, bit-exact")

    a, b = rng.standard_normal((128, 64), dtype=np.float32), rng.standard_normal((64, 96), dtype=np.float32)
    c = rt.empty((128, 96))
    mm = kernels["matmul_16x16x16"]
    rt.launch(mm, mm.grid_for(96, 128), rt.tensor(a), rt.tensor(b), c)
    error = np.abs(c.numpy() - a.astype(np.float64) @ b).max()
    report("matmul_16x16x16", error < 64 * 2**-20, f"128 x 64 x 96, max error {error:.1e}")

    scores = rng.standard_normal((64, 500), dtype=np.float32) * 10
    p = rt.empty(scores.shape)
    rt.launch(kernels["softmax"], scores.shape[0], rt.tensor(scores), p)
    e = np.exp(scores.astype(np.float64) - scores.max(axis=1, keepdims=True))
    error = np.abs(p.numpy() - e / e.sum(axis=1, keepdims=True)).max()
    report("softmax", error < 1e-6, f"64 x 500, max error {error:.1e}")

    stats = rt.statistics()
    print(f"  {stats.environment_hits} kernels from the bundle, {stats.compiles} compiles")
    if stats.compiles:
        print("run_from_bundle: kernels were compiled despite the bundle", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    sys.exit(main(*sys.argv[1:]))
