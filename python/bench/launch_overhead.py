"""What a launch from Python adds to the same launch from C++, side by side in one run.

    python python/bench/launch_overhead.py [--device cpu] [--launches 20000] [--rounds 15]

Each round queues `launches` launches of the example axpy (one workgroup of 256) and
synchronizes, once from C++ (Runtime._cpp_launches: arguments bound once, a loop over
Runtime::launch_values, as a C++ program launches) and once from Python (Runtime.launch with two
cubecc.Tensors and a float), alternating so that both see the same machine. It also times
`import cubecc` in fresh interpreters. Prints one JSON object: the medians per launch in
microseconds, the Python overhead (the difference) and the ratio, and the import time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import cubecc

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def import_ms(samples):
    code = "import time; t = time.perf_counter(); import cubecc; print((time.perf_counter() - t) * 1e3)"
    times = []
    for _ in range(samples):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             cwd="/")
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="",
                        help="default: cpu where it opens (the cheapest launch, so the most exact "
                             "difference), else vulkan")
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--library", default=os.path.join(
        os.environ.get("CUBECC_BUILD_DIR") or os.path.join(REPOSITORY, "build"),
        "examples", "libcubecc_examples.so"))
    args = parser.parse_args()

    device = args.device or next(
        (d for d in ("cpu", "vulkan") if any(e.backend == d and e.available for e in cubecc.devices())),
        "interp")
    rt = cubecc.Runtime(device)
    axpy = rt.kernel(args.library, "axpy")
    x = rt.tensor(np.ones(256, dtype=np.float32))
    y = rt.tensor(np.zeros(256, dtype=np.float32))
    grid = axpy.grid_for(256)
    n = args.launches

    def python_round():
        start = time.perf_counter()
        for _ in range(n):
            rt.launch(axpy, grid, x, y, 0.5)
        rt.synchronize()
        return time.perf_counter() - start

    def cpp_round():
        return rt._cpp_launches(axpy, n, grid, x, y, 0.5)

    python_round(), cpp_round()  # warm: kernel, pool, driver
    cpp, py = [], []
    for _ in range(args.rounds):
        cpp.append(cpp_round() / n * 1e6)
        py.append(python_round() / n * 1e6)
    cpp_us, py_us = statistics.median(cpp), statistics.median(py)
    print(json.dumps({
        "benchmark": "python_launch_overhead",
        "device": rt.device.backend,
        "device_name": rt.device.name,
        "launches_per_round": n,
        "rounds": args.rounds,
        "cpp_us_per_launch": round(cpp_us, 3),
        "python_us_per_launch": round(py_us, 3),
        "python_added_us_per_launch": round(py_us - cpp_us, 3),
        "python_over_cpp": round(py_us / cpp_us, 3),
        "import_ms": round(import_ms(5), 2),
    }, indent=2))


if __name__ == "__main__":
    main()
