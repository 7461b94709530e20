#!/usr/bin/env python3
"""Tables and verdicts for compare.sh.

Reads RESULTS_DIR/raw/<lib>-np<N>-r<round>.txt (mpibench output), runs.tsv and
skipped.tsv; prints one table per rank count with the median over rounds of
each cell, then one verdict line per foundation target.
"""
import re
import statistics
import sys
from pathlib import Path

LIBS = ["ferrocoll", "openmpi", "mpich"]
PEERS = ["openmpi", "mpich"]
KIB, MIB = 1024, 1024 * 1024


def parse_raw(path):
    """Yields (ranks, op, bytes, us, busbw, ok) for each row of one run."""
    ranks = None
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"# op=(\S+) ranks=(\d+)", line)
        if m:
            ranks = int(m.group(2))
            continue
        if not line or line.startswith("#") or ranks is None:
            continue
        f = line.split()
        if len(f) != 6:
            continue
        try:
            yield ranks, f[0], int(f[1]), float(f[2]), float(f[4]), f[5]
        except ValueError:
            continue


def load(results):
    cells = {}  # (ranks, op, bytes) -> lib -> list of (us, busbw, ok)
    order = {}  # ranks -> [(op, bytes)] in first-seen order
    for path in sorted((results / "raw").glob("*-np*-r*.txt")):
        m = re.match(r"(\w+)-np(\d+)-r(\d+)\.txt$", path.name)
        if not m:
            continue
        lib = m.group(1)
        for ranks, op, nbytes, us, busbw, ok in parse_raw(path):
            key = (ranks, op, nbytes)
            if key not in cells:
                cells[key] = {}
                order.setdefault(ranks, []).append((op, nbytes))
            cells[key].setdefault(lib, []).append((us, busbw, ok))
    return cells, order


def read_tsv(path):
    if not path.exists():
        return []
    return [l.split("\t") for l in path.read_text().splitlines() if l.strip()]


def summarize(samples):
    """Median time and busbw over rounds; ok is 'yes' only if every round was."""
    if not samples:
        return None
    us = statistics.median(s[0] for s in samples)
    bw = statistics.median(s[1] for s in samples)
    oks = {s[2] for s in samples}
    ok = "no" if "no" in oks else "yes" if oks == {"yes"} else "-"
    return us, bw, ok, len(samples)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def human(nbytes):
    for unit, size in (("MiB", MIB), ("KiB", KIB)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def table(ranks, keys, cells):
    rows = []
    head = (f"{'op':<15}{'bytes':>10}{'fc_us':>11}{'ompi_us':>11}{'mpich_us':>11}"
            f"{'fc_busbw':>10}{'peer_busbw':>11}{'ratio':>8}  ok(fc/ompi/mpich)")
    rows.append(head)
    stats = {}
    for op, nbytes in keys:
        s = {lib: summarize(cells[(ranks, op, nbytes)].get(lib, [])) for lib in LIBS}
        stats[(op, nbytes)] = s
        us = {lib: (s[lib][0] if s[lib] else None) for lib in LIBS}
        peers = [lib for lib in PEERS if s[lib]]
        best_us = min((us[p] for p in peers), default=None)
        best_bw = max((s[p][1] for p in peers), default=None)
        ratio = us["ferrocoll"] / best_us if us["ferrocoll"] is not None and best_us else None
        oks = "/".join(s[lib][2] if s[lib] else "-" for lib in LIBS)
        rows.append(
            f"{op:<15}{nbytes:>10}{fmt(us['ferrocoll'], '.2f'):>11}"
            f"{fmt(us['openmpi'], '.2f'):>11}{fmt(us['mpich'], '.2f'):>11}"
            f"{fmt(s['ferrocoll'][1] if s['ferrocoll'] else None, '.3f'):>10}"
            f"{fmt(best_bw, '.3f'):>11}{fmt(ratio, '.2f'):>8}  {oks}")
    return rows, stats


def worst(stats, pred, versus):
    """Largest ferrocoll/peer time ratio over cells that pred selects.

    versus: the peers the ratio is taken against (the best of them per cell).
    Returns (ratio, op, bytes, cells) or None when no cell has both sides.
    """
    found, n = None, 0
    for (op, nbytes), s in stats.items():
        if not pred(op, nbytes) or not s["ferrocoll"]:
            continue
        peer = [s[p][0] for p in versus if s[p]]
        if not peer or min(peer) <= 0:
            continue
        r = s["ferrocoll"][0] / min(peer)
        n += 1
        if found is None or r > found[0]:
            found = (r, op, nbytes)
    return None if found is None else (*found, n)


def verdict(name, stats, pred, versus, limit, why_not):
    if why_not:
        return f"{name}: NOT EVALUATED ({why_not})"
    w = None if stats is None else worst(stats, pred, versus)
    if w is None:
        return f"{name}: NOT EVALUATED (no cells with ferrocoll and {'/'.join(versus)} in range)"
    r, op, nbytes, n = w
    state = "MET" if r <= limit else "NOT MET"
    return (f"{name}: {state} (worst ratio {r:.2f} at {op} {human(nbytes)}, "
            f"limit {limit:g}, cells compared: {n})")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: compare.py RESULTS_DIR")
    results = Path(sys.argv[1])
    cells, order = load(results)
    skipped = {r[0]: r[1] for r in read_tsv(results / "skipped.tsv") if len(r) >= 2}
    runs = [r for r in read_tsv(results / "runs.tsv")[1:] if len(r) >= 5]
    meta = results / "meta.txt"
    if meta.exists():
        for line in meta.read_text().splitlines():
            print(f"# {line}")
    busy = re.search(r"(\d+) cores, load at start: ([\d.]+)",
                     meta.read_text() if meta.exists() else "")
    if busy and float(busy.group(2)) > 0.5 * int(busy.group(1)):
        print(f"# WARNING: load average {busy.group(2)} on {busy.group(1)} cores at start:"
              " other work was running, expect noisy numbers")
    rounds = max((int(r[2]) for r in runs), default=0)
    print(f"# cells: median over {rounds} round(s) of mpibench's median batch average;"
          " ratio = ferrocoll us / best peer us (<1: ferrocoll faster)")
    for lib, why in skipped.items():
        print(f"# {lib} skipped: {why}")
    for r in runs:
        if r[3] != "0":
            what = "TIMEOUT" if r[3] in ("124", "137") else f"exit {r[3]}"
            print(f"# run failed: {r[0]} ranks={r[1]} round {r[2]}: {what} after {r[4]}s"
                  f" (rows printed before it are used; see raw/{r[0]}-np{r[1]}-r{r[2]}.err)")

    all_stats = {}
    for ranks in sorted(order):
        rows, stats = table(ranks, order[ranks], cells)
        all_stats[ranks] = stats
        print()
        print(f"## {ranks} ranks")
        for row in rows:
            print(row)

    print()
    fc_missing = skipped.get("ferrocoll")
    if fc_missing is None and not any(r[0] == "ferrocoll" for r in runs):
        fc_missing = "ferrocoll not run"
    elif fc_missing:
        fc_missing = f"ferrocoll skipped: {fc_missing}"

    def why(ranks):
        if fc_missing:
            return fc_missing
        if ranks not in all_stats:
            return f"{ranks} ranks not run"
        return None

    print(verdict("VERDICT 2 ranks: allreduce latency within 1.5x best peer for 8 B - 1 KiB",
                  all_stats.get(2), lambda op, b: op == "allreduce" and 8 <= b <= KIB,
                  PEERS, 1.5, why(2)))
    print(verdict("VERDICT 2 ranks: allreduce bandwidth >= best peer from 1 MiB",
                  all_stats.get(2), lambda op, b: op == "allreduce" and b >= MIB,
                  PEERS, 1.0, why(2)))
    print(verdict("VERDICT 4 ranks: no slower than Open MPI at any size (all ops)",
                  all_stats.get(4), lambda op, b: True, ["openmpi"], 1.0, why(4)))

    bad, checked = [], 0
    for ranks, stats in sorted(all_stats.items()):
        for (op, nbytes), s in stats.items():
            for lib in LIBS:
                if s[lib] and s[lib][2] != "-":
                    checked += 1
                if s[lib] and s[lib][2] == "no":
                    bad.append(f"{lib} {op} {nbytes} B at {ranks} ranks")
    if bad:
        print(f"CORRECTNESS: {len(bad)} of {checked} cells with wrong results: "
              + "; ".join(bad))
    elif checked:
        print(f"CORRECTNESS: all {checked} checked cells ok")
    else:
        print("CORRECTNESS: no checked cells (no run produced rows)")


if __name__ == "__main__":
    main()
