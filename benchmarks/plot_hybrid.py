"""SVG plot of a hybrid sweep (benchmarks/gmg_poisson.py -hybrid_sweep): setup + solve time against
the number of GPU levels L_theta, one line per result file (the paper's Figures 5 and 6).

    python benchmarks/plot_hybrid.py OUT.svg results/hybrid_sweep_3d_h100.json results/hybrid_sweep_2d_h100.json
"""
import json
import math
import re
import sys


def series(path):
    d = json.load(open(path))
    pts = []
    for r in d["results"]:
        m = re.search(r"hybrid: (\d+) GPU levels", r.get("solver", ""))
        if m and "total_s" in r:
            pts.append((int(m.group(1)), r["total_s"] * 1e3))
    r0 = d["results"][0]
    return f"{r0['n']}^{r0['dim']} ({d['meta'].get('device', '')})", sorted(pts)


def main(out, paths):
    W, H, L, B = 640, 400, 70, 50
    data = [series(p) for p in paths]
    xmax = max(x for _, pts in data for x, _ in pts)
    ys = [y for _, pts in data for _, y in pts]
    lo, hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    px = lambda x: L + (W - L - 20) * x / xmax  # noqa: E731
    py = lambda y: H - B - (H - B - 20) * (math.log10(y) - lo) / (hi - lo)  # noqa: E731
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<line x1="{L}" y1="{H - B}" x2="{W - 20}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="20" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 10}" text-anchor="middle">GPU levels L_theta (the rest on the CPU)</text>',
           f'<text x="15" y="{H / 2}" transform="rotate(-90 15 {H / 2})" text-anchor="middle">setup + solve (ms, log)</text>']
    for x in range(xmax + 1):
        svg.append(f'<text x="{px(x)}" y="{H - B + 16}" text-anchor="middle">{x}</text>')
    for e in range(lo, hi + 1):
        svg.append(f'<text x="{L - 6}" y="{py(10 ** e) + 4}" text-anchor="end">{10 ** e:g}</text>')
    for k, (label, pts) in enumerate(data):
        colour = ["#1f77b4", "#d62728", "#2ca02c"][k % 3]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        svg.append(f'<text x="{W - 200}" y="{40 + 16 * k}" fill="{colour}">{label}</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
