#!/usr/bin/env python3
"""gen-kernels.py N OUT.cir: a module of N distinct kernels (for the bundle scale and shard tests).

Kernel k computes y[i] = x[i] * c + d with its own constants c and d, and every third one adds a
loop, so the kernels differ in their hashes and a little in their shapes."""
import sys

def kernel(k):
    c = 1.0 + k / 1024.0
    d = float(k % 97)
    body = [
        f"  kernel @k{k}(%x: buffer<f32, read>, %y: buffer<f32, readwrite>) workgroup(64, 1, 1) {{",
        "    %gid = global_id : u32x3",
        "    %i = vec.extract %gid {lane = 0} : u32",
        "    %n = buffer.size %y : u32",
        "    %ok = lt %i, %n : bool",
        "    if %ok {",
        "      %xi = load %x, %i : f32",
        f"      %c = const {c!r} : f32",
        f"      %d = const {d!r} : f32",
        "      %m = mul %xi, %c : f32",
        "      %r = add %m, %d : f32",
        "      store %y, %i, %r",
    ]
    if k % 3 == 0:
        body += [
            "      %lo = const 0 : u32",
            f"      %hi = const {k % 7 + 2} : u32",
            "      %one = const 1 : u32",
            "      for %lo, %hi, %one (%j: u32) {",
            "        %v = load %y, %i : f32",
            "        %w = mul %v, %c : f32",
            "        store %y, %i, %w",
            "        yield",
            "      }",
        ]
    body += ["      yield", "    }", "    return", "  }"]
    return "\n".join(body)

n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write("module @generated {\n")
    f.write("\n".join(kernel(k) for k in range(n)))
    f.write("\n}\n")
