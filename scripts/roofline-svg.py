#!/usr/bin/env python3
"""roofline-svg.py: draw the roofline chart of a gpu_roofline JSON file as SVG.

    roofline-svg.py ROOFLINE.json > roofline.svg

Two panels, from the JSON alone (no plotting library): bandwidth kernels as bars of GB/s under
the measured copy bandwidth (the ceiling, a line), and GEMMs as points of TFLOP/s per shape,
cubecc's and cuBLAS's side by side, on a log scale. A JSON that says "skipped" draws a one-line
note instead. Exit status 2 on a file that is not gpu_roofline's JSON.
"""
import json
import math
import sys
from xml.sax.saxutils import escape

WIDTH, PANEL_H, MARGIN = 960, 320, 70


def bar_panel(rows, ceiling, top):
    """Bandwidth kernels as bars against the copy ceiling; returns SVG elements."""
    out = [f'<text x="{MARGIN}" y="{top - 10}" font-weight="bold">Bandwidth kernels (GB/s); '
           f'line: measured device-to-device copy</text>']
    rates = [r["rate"] for r in rows if r["rate"] is not None]
    scale_max = max(rates + ([ceiling] if ceiling else []) + [1e-9]) * 1.1
    plot_w = WIDTH - 2 * MARGIN
    step = plot_w / max(1, len(rows))
    y_of = lambda v: top + PANEL_H - v / scale_max * PANEL_H
    out.append(f'<line x1="{MARGIN}" y1="{top + PANEL_H}" x2="{WIDTH - MARGIN}" '
               f'y2="{top + PANEL_H}" stroke="black"/>')
    for i, r in enumerate(rows):
        if r["rate"] is None:
            continue
        x = MARGIN + i * step + step * 0.15
        y = y_of(r["rate"])
        label = r["kernel"]
        ratio = "" if r["ratio"] is None else f' ({r["ratio"]:.0%})'
        out.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{step * 0.7:.1f}" '
                   f'height="{top + PANEL_H - y:.1f}" fill="#4878a8"/>')
        out.append(f'<text x="{x:.1f}" y="{top + PANEL_H + 16}" font-size="12">'
                   f'{escape(label)}</text>')
        out.append(f'<text x="{x:.1f}" y="{y - 4:.1f}" font-size="11">{r["rate"]:.0f}'
                   f'{escape(ratio)}</text>')
    if ceiling:
        y = y_of(ceiling)
        out.append(f'<line class="ceiling" x1="{MARGIN}" y1="{y:.1f}" x2="{WIDTH - MARGIN}" '
                   f'y2="{y:.1f}" stroke="#c03030" stroke-dasharray="6,4"/>')
        out.append(f'<text x="{WIDTH - MARGIN - 160}" y="{y - 4:.1f}" font-size="11" '
                   f'fill="#c03030">copy {ceiling:.0f} GB/s</text>')
    return out


def gemm_panel(rows, top):
    """GEMM shapes as points, cubecc and cuBLAS, TFLOP/s on a log scale."""
    out = [f'<text x="{MARGIN}" y="{top - 10}" font-weight="bold">GEMM (TFLOP/s, log scale): '
           f'cubecc (filled) and cuBLAS (open)</text>']
    values = [v for r in rows for v in (r["rate"], r["reference"]) if v]
    if not values:
        values = [1.0]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    if hi <= lo:
        hi = lo * 10
    plot_w = WIDTH - 2 * MARGIN
    step = plot_w / max(1, len(rows))
    y_of = lambda v: top + PANEL_H - (math.log10(v) - math.log10(lo)) / (
        math.log10(hi) - math.log10(lo)) * PANEL_H
    decade = lo
    while decade <= hi:
        y = y_of(decade)
        out.append(f'<line x1="{MARGIN}" y1="{y:.1f}" x2="{WIDTH - MARGIN}" y2="{y:.1f}" '
                   f'stroke="#dddddd"/>')
        out.append(f'<text x="{MARGIN - 50}" y="{y + 4:.1f}" font-size="11">{decade:g}</text>')
        decade *= 10
    for i, r in enumerate(rows):
        x = MARGIN + i * step + step / 2
        if r["rate"]:
            out.append(f'<circle class="cubecc" cx="{x:.1f}" cy="{y_of(r["rate"]):.1f}" r="4" '
                       f'fill="#4878a8"/>')
        if r["reference"]:
            out.append(f'<circle class="cublas" cx="{x:.1f}" cy="{y_of(r["reference"]):.1f}" '
                       f'r="4" fill="none" stroke="#c03030"/>')
        out.append(f'<text transform="translate({x:.1f},{top + PANEL_H + 8}) rotate(60)" '
                   f'font-size="9">{escape(r["kernel"] + " " + r["shape"])}</text>')
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as f:
            data = json.load(f)
        if data.get("bench") != "gpu_roofline":
            raise ValueError("not gpu_roofline's JSON")
    except (OSError, ValueError) as e:
        print(f"roofline-svg: {sys.argv[1]}: {e}", file=sys.stderr)
        return 2
    parts = []
    if "skipped" in data:
        height = 60
        parts.append(f'<text x="20" y="35">gpu_roofline was skipped: '
                     f'{escape(str(data["skipped"]))}</text>')
    else:
        rows = data.get("rows", [])
        bandwidth = [r for r in rows if r["kind"] == "bandwidth"]
        gemms = [r for r in rows if r["kind"] == "gemm"]
        height = 2 * PANEL_H + 260
        parts.append(f'<text x="{MARGIN}" y="24" font-size="16">Roofline on '
                     f'{escape(data.get("device", "?"))}</text>')
        parts += bar_panel(bandwidth, data.get("copy_gbs"), 70)
        parts += gemm_panel(gemms, PANEL_H + 160)
    print(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
          f'font-family="sans-serif" font-size="13">')
    print("\n".join(parts))
    print("</svg>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
