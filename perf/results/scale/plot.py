#!/usr/bin/env python3
"""Draws braid-scale-table --csv output as an SVG: simulated all-reduce time against bytes per rank,
one panel per rank count, one line per algorithm (dashed: its alpha-beta figure). No plotting
library needed.

Usage: python3 plot.py allreduce-1k-16k.csv > allreduce-1k-16k.svg
"""

import csv
import math
import sys
from collections import defaultdict

COLORS = {"ring": "#1f77b4", "tree": "#2ca02c", "rhd": "#ff7f0e", "rd": "#9467bd",
          "hier": "#8c564b", "hier_rhd": "#d62728"}
W, H, PAD = 360, 300, 55


def size_label(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale:
            return f"{b // scale}{unit}"
    return f"{b}B"


def panel(out, x0, n, rows, ymin, ymax):
    xs = sorted({r["bytes"] for r in rows})
    lx0, lx1 = math.log2(xs[0]), math.log2(xs[-1])
    ly0, ly1 = math.log10(ymin), math.log10(ymax)

    def px(b):
        return x0 + PAD + (math.log2(b) - lx0) / max(lx1 - lx0, 1) * (W - PAD - 10)

    def py(us):
        return H - PAD + 10 - (math.log10(us) - ly0) / (ly1 - ly0) * (H - PAD - 20)

    out.append(f'<text x="{x0 + W / 2}" y="16" text-anchor="middle" font-size="13">{n} ranks</text>')
    out.append(f'<rect x="{x0 + PAD}" y="10" width="{W - PAD - 10}" height="{H - PAD - 10 + 10}" '
               'fill="none" stroke="#999"/>')
    for b in xs:
        out.append(f'<text x="{px(b):.1f}" y="{H - PAD + 28}" text-anchor="middle" font-size="9">'
                   f'{size_label(b)}</text>')
    for e in range(math.ceil(ly0), math.floor(ly1) + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{x0 + PAD}" x2="{x0 + W - 10}" y1="{y:.1f}" y2="{y:.1f}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{x0 + PAD - 4}" y="{y + 3:.1f}" text-anchor="end" font-size="9">'
                   f'1e{e}</text>')
    by_algo = defaultdict(list)
    for r in rows:
        by_algo[r["algorithm"]].append(r)
    for algo, pts in by_algo.items():
        pts.sort(key=lambda r: r["bytes"])
        color = COLORS.get(algo, "#000")
        sim = " ".join(f"{px(r['bytes']):.1f},{py(r['sim']):.1f}" for r in pts)
        out.append(f'<polyline points="{sim}" fill="none" stroke="{color}" stroke-width="2"/>')
        ab = [r for r in pts if r["ab"] > 0]
        if ab:
            line = " ".join(f"{px(r['bytes']):.1f},{py(r['ab']):.1f}" for r in ab)
            out.append(f'<polyline points="{line}" fill="none" stroke="{color}" '
                       'stroke-dasharray="4,3" stroke-width="1"/>')


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            rows.append({"ranks": int(r["ranks"]), "bytes": int(r["bytes"]),
                         "algorithm": r["algorithm"], "sim": float(r["simulated_us"]),
                         "ab": float(r["alpha_beta_us"])})
    ranks = sorted({r["ranks"] for r in rows})
    values = [r["sim"] for r in rows] + [r["ab"] for r in rows if r["ab"] > 0]
    ymin, ymax = 10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{max(W * len(ranks), 820)}" height="{H + 40}" '
           'font-family="sans-serif">', '<rect width="100%" height="100%" fill="white"/>']
    for i, n in enumerate(ranks):
        panel(out, i * W, n, [r for r in rows if r["ranks"] == n], ymin, ymax)
    out.append(f'<text x="10" y="{H + 30}" font-size="10">microseconds (log) against bytes per '
               'rank; solid: simulated plans, dashed: alpha-beta</text>')
    x = 330
    for algo, color in COLORS.items():
        out.append(f'<rect x="{x}" y="{H + 22}" width="12" height="4" fill="{color}"/>')
        out.append(f'<text x="{x + 16}" y="{H + 28}" font-size="10">{algo}</text>')
        x += 75
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
