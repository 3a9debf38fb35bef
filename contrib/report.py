#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""report.py RUN.jsonl... [--svg FILE] [--accuracy-svg FILE] [--skip N]: turns dltrain's metrics (one
JSON object per log interval) into a throughput / speed-up / efficiency table, one row per run,
grouped by precision (from the file name, e.g. fp32-8.jsonl, else "run"), with speed-up against
that group's smallest run, and optionally an SVG plot of speed-up against ranks like the
benchmark's figures. Runs that validated (--eval-every: "eval_accuracy" events) also get an
accuracy table (best and final validation top-1, time to best: the training time over every
incarnation of a resumed run and the wall time since its first start; images/s beside it) and,
with --accuracy-svg, validation top-1 against epochs and against training time side by side. The first
--skip intervals of each run (default 1) are left out as warm-up. Standard library only."""
import argparse
import json
import os
import re
import sys


def load(path, skip):
    rows = []
    with open(path) as f:
        lines = f.read().split("\n")
    # A last line without its newline is a line cut short (a full disk, a killed run): skipped,
    # saying so. Anything else that is not JSON is an error.
    torn = lines[-1].strip()
    for n, line in enumerate(lines[:-1], 1):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            sys.exit(f"report.py: {path}:{n}: not JSON ({e})")
    if torn:
        try:
            rows.append(json.loads(torn))
        except json.JSONDecodeError:
            print(f"report.py: {path}:{len(lines)}: skipping a torn last line ({len(torn)} bytes, no newline: the run "
                  "was cut short while writing it)", file=sys.stderr)
    # MLPerf-format events (key/value/metadata): validation top-1 with its epoch and time. The time is
    # the training time over every incarnation of a resumed run (train_time; "time" restarts with
    # each one, and is all that files of older versions have), wall_time the time since its first start.
    evals = [{"epoch": r["metadata"].get("epoch_num", 0),
              "time": r["metadata"].get("train_time", r["metadata"].get("time", 0.0)),
              "wall": r["metadata"].get("wall_time"), "val_top1": r["value"]}
             for r in rows if r.get("key") == "eval_accuracy" and isinstance(r.get("metadata"), dict)]
    rows = [r for r in rows if "images_per_s" in r and "ranks" in r]
    if not rows:
        sys.exit(f"report.py: {path}: no metrics lines")
    use, images, seconds = throughput(rows, skip)
    m = re.match(r"(.+?)-(\d+)\.jsonl$", os.path.basename(path))
    # The shares are weighted by each interval's time, as the images per second are.
    # ("wait" is named "allreduce" in files of earlier versions)
    weigh = lambda share: sum(share(r) * s for r, s in use) / seconds
    return {"file": path, "group": m.group(1) if m else "run", "ranks": use[-1][0]["ranks"], "ips": images / seconds,
            "data": weigh(lambda r: r.get("data_wait", 0)), "wait": weigh(lambda r: r.get("wait", r.get("allreduce", 0))),
            "loss": use[-1][0].get("loss"), "evals": evals}


def throughput(rows, skip):
    """Images per second as totals divide: all images over all seconds, each interval weighted by its
    length (a mean of the intervals' rates counts a short fast interval as much as a long slow one:
    231 images/s was reported for a 46 images/s run). An interval's images are its steps times the
    global batch; its seconds, its images over its rate. Each run of the file (a resumed run appends
    with a new run_id) leaves out its first `skip` intervals as warm-up. Returns the (row, seconds)
    pairs used, their images and their seconds."""
    use, runs, prev_step = [], [], 0
    for r in rows:
        if not runs or r.get("run_id") != runs[-1][0].get("run_id"):
            runs.append([])
        runs[-1].append(r)
    for run in runs:
        for i, r in enumerate(run):
            start = run[i - 1]["step"] if i else prev_step  # a run's first interval starts where the file was
            steps = max(r["step"] - start, 0)
            if i >= skip and steps > 0 and r["images_per_s"] > 0:
                n = steps * r.get("batch", 0) * r["ranks"]
                use.append((r, n / r["images_per_s"], n))
        prev_step = run[-1]["step"]
    if not use:  # too few intervals to leave any out: the last one
        r = rows[-1]
        n = r.get("batch", 0) * r["ranks"] or r["images_per_s"]
        use = [(r, n / r["images_per_s"] if r["images_per_s"] > 0 else 1.0, n)]
    return [(r, s) for r, s, _ in use], sum(n for _, _, n in use), sum(s for _, s, _ in use)


def accuracy_svg(runs, path):
    """Validation top-1 against epochs (left) and against training time (right), one line per run."""
    w, h, m, gap = 900, 380, 55, 60
    pw = (w - 2 * m - gap) / 2
    maxe = max(max(e["epoch"] for e in r["evals"]) for r in runs)
    maxt = max(max(e["time"] for e in r["evals"]) for r in runs) or 1
    sy = lambda v: h - m - (h - 2 * m) * v
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>']
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    for panel, (key, top, label) in enumerate([("epoch", maxe, "epoch"), ("time", maxt, "training time (s)")]):
        x0 = m + panel * (pw + gap)
        sx = lambda v, x0=x0, top=top: x0 + pw * v / top
        out += [f'<line x1="{x0}" y1="{h - m}" x2="{x0 + pw}" y2="{h - m}" stroke="black"/>',
                f'<line x1="{x0}" y1="{m}" x2="{x0}" y2="{h - m}" stroke="black"/>',
                f'<text x="{x0 + pw / 2}" y="{h - 15}" text-anchor="middle">{label}</text>']
        for t in (0, 0.25, 0.5, 0.75, 1.0):
            out.append(f'<text x="{x0 - 6}" y="{sy(t) + 4}" text-anchor="end">{t:.2f}</text>')
        for i, r in enumerate(runs):
            c = colours[i % len(colours)]
            pts = " ".join(f"{sx(e[key]):.1f},{sy(e['val_top1']):.1f}" for e in r["evals"])
            out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
            if panel == 0:
                out.append(f'<text x="{m + 10}" y="{m + 16 * (i + 1)}" fill="{c}">{os.path.basename(r["file"])}</text>')
    out.append(f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">validation top-1</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def svg(groups, path):
    w, h, m = 640, 420, 60
    maxr = max(r["ranks"] for g in groups.values() for r in g)
    maxs = max(max(r["speedup"] for g in groups.values() for r in g), maxr)
    sx = lambda v: m + (w - 2 * m) * v / maxr
    sy = lambda v: h - m - (h - 2 * m) * v / maxs
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">ranks (GPUs)</text>',
           f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">speed-up</text>',
           f'<line x1="{sx(0)}" y1="{sy(0)}" x2="{sx(maxr)}" y2="{sy(maxr)}" stroke="#999" stroke-dasharray="4"/>']
    for t in range(0, maxr + 1, max(1, maxr // 8)):
        out.append(f'<text x="{sx(t)}" y="{h - m + 16}" text-anchor="middle">{t}</text>')
        out.append(f'<text x="{m - 8}" y="{sy(t) + 4}" text-anchor="end">{t}</text>')
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    for i, (name, rows) in enumerate(sorted(groups.items())):
        c = colours[i % len(colours)]
        pts = " ".join(f"{sx(r['ranks']):.1f},{sy(r['speedup']):.1f}" for r in rows)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        for r in rows:
            out.append(f'<circle cx="{sx(r["ranks"]):.1f}" cy="{sy(r["speedup"]):.1f}" r="3" fill="{c}"/>')
        out.append(f'<text x="{w - m - 80}" y="{m + 16 * i}" fill="{c}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--svg")
    ap.add_argument("--accuracy-svg")
    ap.add_argument("--skip", type=int, default=1)
    a = ap.parse_args()
    groups, runs = {}, []
    for p in a.runs:
        r = load(p, a.skip)
        groups.setdefault(r["group"], []).append(r)
        runs.append(r)
    print(f"{'group':<8} {'ranks':>5} {'images/s':>10} {'per rank':>9} {'speed-up':>8} {'efficiency':>10} {'data':>6} {'wait':>9}")
    for name, rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["ranks"])
        base = rows[0]
        for r in rows:
            r["speedup"] = r["ips"] / base["ips"] * base["ranks"]
            eff = r["speedup"] / r["ranks"]
            print(f"{name:<8} {r['ranks']:>5} {r['ips']:>10.1f} {r['ips'] / r['ranks']:>9.1f} {r['speedup']:>7.2f}x "
                  f"{100 * eff:>9.1f}% {100 * r['data']:>5.1f}% {100 * r['wait']:>8.1f}%")
    if a.svg:
        svg(groups, a.svg)
        print(f"report.py: plot written to {a.svg}")
    validated = [r for r in runs if r["evals"]]
    if validated:
        print(f"\n{'run':<28} {'epochs':>6} {'best top-1':>10} {'at epoch':>8} {'train s':>8} {'wall s':>8} {'final':>7} "
              f"{'images/s':>10}")
        for r in validated:
            best = max(r["evals"], key=lambda e: e["val_top1"])
            wall = f"{best['wall']:>8.1f}" if best["wall"] is not None else f"{'-':>8}"
            print(f"{os.path.basename(r['file']):<28} {r['evals'][-1]['epoch']:>6} {100 * best['val_top1']:>9.2f}% "
                  f"{best['epoch']:>8} {best['time']:>8.1f} {wall} {100 * r['evals'][-1]['val_top1']:>6.2f}% "
                  f"{r['ips']:>10.1f}")
    if a.accuracy_svg:
        if not validated:
            sys.exit("report.py: --accuracy-svg: no run has validation events (train with --eval-every)")
        accuracy_svg(validated, a.accuracy_svg)
        print(f"report.py: accuracy plot written to {a.accuracy_svg}")


if __name__ == "__main__":
    main()
