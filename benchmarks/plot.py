"""The figures of docs/performance.md, drawn with matplotlib from benchmarks/results/.

    pip install .[plot]; python benchmarks/plot.py [-out docs/figures]

- ``hybrid_sweep.png``: the hybrid CPU-GPU cycle (gmg_poisson.py -hybrid_sweep; Feng et al.,
  Figures 5 and 6): setup + solve against the number of levels on the GPU, one line per result file;
- ``headline.png``: setup + solve of report.py's headline problems beside the baselines of the
  same run (PETSc's PCMG, GAMG, CG + Jacobi), log scale.
"""
import argparse
import os
import re

import matplotlib
import report

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HYBRID = ["hybrid_sweep_3d_h100.json", "hybrid_sweep_2d_h100.json"]


def hybrid_series(name):
    """(label, [(GPU levels, setup + solve ms)]) of one sweep."""
    data = report.load(name)
    pts = []
    for r in data["results"]:
        m = re.search(r"hybrid: (\d+) GPU levels", r.get("solver", ""))
        if m and "total_s" in r:
            pts.append((int(m.group(1)), r["total_s"] * 1e3))
    r0 = data["results"][0]
    return f"{report.label(r0['n'], r0['dim'])} ({data['meta']['device']})", sorted(pts)


def hybrid_sweep(path):
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name in HYBRID:
        label, pts = hybrid_series(name)
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("levels on the GPU, L_theta (the rest on the CPU)")
    ax.set_ylabel("setup + solve (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def headline(path):
    rows = report.headline_rows()
    fig, ax = plt.subplots(figsize=(7.5, 0.6 + 0.9 * len(rows)))
    y, ticks, colours = 0, [], {}
    for title, _, device, ours, base in rows:
        bars = [("pcplugins", ours)] + base
        for who, r in bars:
            first = who not in colours
            colours.setdefault(who, f"C{len(colours)}")
            ax.barh(y, r["total_s"] * 1e3, color=colours[who], label=who if first else None)
            ax.text(r["total_s"] * 1e3, y, f" {r['total_s'] * 1e3:.0f}", va="center", fontsize=7)
            y += 1
        ticks.append((y - (len(bars) + 1) / 2, f"{title.split(',')[0]}, {device.replace('NVIDIA ', '')}"))
        y += 1
    ax.set_yticks([t for t, _ in ticks], [s for _, s in ticks], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("setup + solve (ms), log scale")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-out", default=os.path.join(report.HERE, "..", "docs", "figures"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    hybrid_sweep(os.path.join(out, "hybrid_sweep.png"))
    headline(os.path.join(out, "headline.png"))


if __name__ == "__main__":
    main()
