#!/usr/bin/env python3
"""Tables and verdicts for compare.sh.

Reads RESULTS_DIR/raw/<lib>-np<N>-r<round>.txt (mpibench output), runs.tsv and
skipped.tsv; prints one table per rank count with the median over rounds of
each cell, then one verdict line per target (the foundation's, then the
shared-memory performance issue's), and writes busbw.png (busbw against size,
one panel per op and rank count) when matplotlib is installed.
"""
import re
import statistics
import sys
from pathlib import Path

LIBS = ["ferrocoll", "openmpi", "mpich"]
PEERS = ["openmpi", "mpich"]
KIB, MIB = 1024, 1024 * 1024


def parse_raw(path):
    """One run's rows, (ranks, op, bytes, us, busbw, ok), and its "# loop"
    lines (mpibench -S: each timed call with its barrier), (ranks, op,
    bytes, us), read in one pass."""
    rows, loops = [], []
    ranks = None
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"# op=(\S+) ranks=(\d+)", line)
        if m:
            ranks = int(m.group(2))
            continue
        loop = re.match(r"# loop (\S+) (\d+) ([\d.]+)", line)
        if loop and ranks is not None:
            loops.append((ranks, loop.group(1), int(loop.group(2)), float(loop.group(3))))
            continue
        if not line or line.startswith("#") or ranks is None:
            continue
        f = line.split()
        if len(f) != 6:
            continue
        try:
            rows.append((ranks, f[0], int(f[1]), float(f[2]), float(f[4]), f[5]))
        except ValueError:
            continue
    return rows, loops


def raw_runs(results):
    """Each raw run file, parsed once: (lib, round, rows, loops)."""
    for path in sorted((results / "raw").glob("*-np*-r*.txt")):
        m = re.match(r"(\w+)-np(\d+)-r(\d+)\.txt$", path.name)
        if m:
            yield (m.group(1), m.group(3), *parse_raw(path))


def load(raw, slow=frozenset()):
    """raw: `raw_runs`' runs. slow: (lib, ranks, round, op) of runs made in
    the host's slow state; their samples are marked, and used only where a
    cell has no others."""
    cells = {}  # (ranks, op, bytes) -> lib -> list of (us, busbw, ok, slow)
    order = {}  # ranks -> [(op, bytes)] in first-seen order
    for lib, rnd, rows, _ in raw:
        for ranks, op, nbytes, us, busbw, ok in rows:
            key = (ranks, op, nbytes)
            if key not in cells:
                cells[key] = {}
                order.setdefault(ranks, []).append((op, nbytes))
            was_slow = (lib, str(ranks), rnd, op) in slow
            cells[key].setdefault(lib, []).append((us, busbw, ok, was_slow))
    return cells, order


def load_loops(raw):
    """The loop lines of `raw_runs`' runs: {(ranks, op, bytes): {lib: [us, ...]}}."""
    loops = {}
    for lib, _, _, lines in raw:
        for ranks, op, nbytes, us in lines:
            loops.setdefault((ranks, op, nbytes), {}).setdefault(lib, []).append(us)
    return loops


def print_loops(loops):
    """One table per rank count of the -S loops, medians over the rounds."""
    for ranks in sorted({k[0] for k in loops}):
        print()
        print(f"## {ranks} ranks, -S: each timed call with the barrier after it"
              " (us, the slowest rank's loop; where ranks outnumber cores the calls'"
              " own times above depend on which rank runs first after the barrier)")
        print(f"{'#op':<16}{'bytes':>12} {'ferrocoll':>12} {'openmpi':>12} {'mpich':>12}"
              f" {'ratio':>7}")
        for (r, op, nbytes), libs in sorted(loops.items()):
            if r != ranks:
                continue
            med = {lib: statistics.median(v) for lib, v in libs.items()}
            peers = [med[p] for p in PEERS if p in med]
            ratio = (f"{med['ferrocoll'] / min(peers):7.2f}"
                     if "ferrocoll" in med and peers and min(peers) > 0 else f"{'-':>7}")
            cols = " ".join(f"{med[lib]:12.3f}" if lib in med else f"{'-':>12}" for lib in LIBS)
            print(f"{op:<16}{nbytes:>12} {cols} {ratio}")


def slow_runs(runs):
    """Runs whose cache-line round trip, probed before or after them, took
    over twice the usual one (the lower quartile of every probe of the
    comparison; one probe here read 43 ns against the usual 105-120): the
    host's slow state, in which every small call takes several times as
    long. Returns (set of (lib, ranks, round, op), limit in ns, probed run
    count)."""
    probes = {}
    for r in runs:
        if len(r) < 7:
            continue
        try:
            probes[(r[0], r[1], r[2], r[5])] = [float(x) for x in r[6].split("/")]
        except ValueError:
            continue
    if not probes:
        return frozenset(), None, 0
    every = sorted(x for v in probes.values() for x in v)
    limit = 2 * every[len(every) // 4]
    slow = frozenset(k for k, v in probes.items() if max(v) > limit)
    return slow, limit, len(probes)


def read_tsv(path):
    if not path.exists():
        return []
    return [l.split("\t") for l in path.read_text().splitlines() if l.strip()]


def summarize(samples):
    """Median time and busbw over rounds (over those not made in the slow
    state, where there are any); ok is 'yes' only if every round was."""
    if not samples:
        return None
    oks = {s[2] for s in samples}
    samples = [s for s in samples if not s[3]] or samples
    us = statistics.median(s[0] for s in samples)
    bw = statistics.median(s[1] for s in samples)
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
            f"{op:<15}{nbytes:>10}{fmt(us['ferrocoll'], '.3f'):>11}"
            f"{fmt(us['openmpi'], '.3f'):>11}{fmt(us['mpich'], '.3f'):>11}"
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


def algbw(nbytes, us):
    return nbytes / (us * 1e-6) / 1e9


def switch_floor(meta_text, ranks, stats):
    """The floor of a small collective where ranks outnumber cores, from the
    core switches floor.c measured before each round (None without them).
    Every rank must run between two calls of its own: in one turn on its
    core a rank finishes the call its core-mates already reached and then,
    at most, the next one (its mates reach the one after only once they run
    again). So each core runs each of its k ranks at least once per two
    calls: k/2 switches per call."""
    cores = re.search(r"(\d+) cores", meta_text)
    switches = [int(m) for m in re.findall(r"core switch (\d+) ns", meta_text)]
    if not cores or not switches or not stats or ranks <= int(cores.group(1)):
        return None
    per_call = -(-ranks // int(cores.group(1))) / 2
    ns = statistics.median(switches)
    seen = []
    for op, nbytes, lib in (("barrier", 0, "ferrocoll"), ("allreduce", 8, "ferrocoll"),
                            ("allreduce", 8, "openmpi")):
        cell = stats.get((op, nbytes))
        if cell and cell[lib]:
            seen.append(f"{lib} {op}{'' if op == 'barrier' else ' 8 B'} {cell[lib][0]:.3f} us")
    return (f"FLOOR {ranks} ranks on {cores.group(1)} cores: a collective call costs each core"
            f" at least {per_call:g} switch(es), {per_call * ns / 1e3:.2f} us at {ns:.0f} ns"
            f" (floor.c's core switch, median of {len(switches)} rounds)"
            + (f"; here {', '.join(seen)}" if seen else ""))


def print_perf_verdicts(all_stats, why):
    """The shared-memory performance issue's targets. A bandwidth factor f
    over a peer is a time ratio of at most 1/f (same bytes, same formula)."""
    two, four = all_stats.get(2), all_stats.get(4)
    small = lambda b: 8 <= b <= 4 * KIB
    print(verdict("VERDICT perf 2 ranks: allreduce latency <= 0.8x best peer for 8 B - 4 KiB",
                  two, lambda op, b: op == "allreduce" and small(b), PEERS, 0.8, why(2)))
    print(verdict("VERDICT perf 2 ranks: allreduce busbw >= 1.5x best peer from 64 KiB",
                  two, lambda op, b: op == "allreduce" and b >= 64 * KIB, PEERS, 1 / 1.5,
                  why(2)))
    print(verdict("VERDICT perf 2 ranks: allreduce busbw >= 2x best peer from 8 MiB",
                  two, lambda op, b: op == "allreduce" and b >= 8 * MIB, PEERS, 0.5, why(2)))
    cell = two.get(("allreduce", 32 * MIB)) if two else None
    if cell and cell["ferrocoll"]:
        bw = algbw(32 * MIB, cell["ferrocoll"][0])
        state = "MET" if bw >= 4.0 else "NOT MET"
        print(f"VERDICT perf 2 ranks: allreduce 32 MiB algbw >= 4 GB/s: {state} ({bw:.2f} GB/s)")
    else:
        print("VERDICT perf 2 ranks: allreduce 32 MiB algbw >= 4 GB/s: NOT EVALUATED "
              "(no 32 MiB allreduce cell)")
    print(verdict("VERDICT perf 4 ranks: allreduce latency <= 0.5x Open MPI below 64 KiB",
                  four, lambda op, b: op == "allreduce" and b < 64 * KIB, ["openmpi"], 0.5,
                  why(4)))
    print(verdict("VERDICT perf 4 ranks: allreduce bandwidth >= 1.5x Open MPI from 64 KiB",
                  four, lambda op, b: op == "allreduce" and b >= 64 * KIB, ["openmpi"],
                  1 / 1.5, why(4)))
    # Point-to-point rows (pingpong, sendrecv, halo) are in the tables, not in
    # the collective targets.
    others = lambda op: op not in ("allreduce", "pingpong", "sendrecv", "halo")
    for ranks, stats in ((2, two), (4, four)):
        print(verdict(f"VERDICT perf {ranks} ranks: other collectives >= 1.0x best peer "
                      "at every size", stats, lambda op, b: others(op), PEERS, 1.0, why(ranks)))
        print(verdict(f"VERDICT perf {ranks} ranks: other collectives >= 1.5x best peer "
                      "from 1 MiB", stats, lambda op, b: others(op) and b >= MIB, PEERS,
                      1 / 1.5, why(ranks)))


def print_tcp_verdicts(all_stats, why):
    """The TCP issue's targets, against Open MPI's tcp btl in the same run."""
    for ranks, stats in sorted(all_stats.items()):
        print(verdict(f"VERDICT tcp {ranks} ranks: allreduce busbw >= 1.5x Open MPI from 1 MiB",
                      stats, lambda op, b: op == "allreduce" and b >= MIB, ["openmpi"],
                      1 / 1.5, why(ranks)))
        print(verdict(f"VERDICT tcp {ranks} ranks: latency <= 1.0x Open MPI up to 4 KiB "
                      "(allreduce, pingpong)", stats,
                      lambda op, b: op in ("allreduce", "pingpong") and b <= 4 * KIB,
                      ["openmpi"], 1.0, why(ranks)))


def plot(all_stats, path):
    """busbw against size for the three libraries, one panel per op and rank
    count (log-log)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# plot skipped: matplotlib is not installed (python3 -m pip install matplotlib)")
        return
    panels = [(ranks, op) for ranks, stats in sorted(all_stats.items())
              for op in dict.fromkeys(op for op, _ in stats) if op != "barrier"]
    if not panels:
        return
    cols = 4
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, (ranks, op) in zip(axes.flat, panels):
        stats = all_stats[ranks]
        for lib in LIBS:
            pts = sorted((b, s[lib][1]) for (o, b), s in stats.items()
                         if o == op and s[lib] and b > 0 and s[lib][1] > 0)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=lib)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{op}, {ranks} ranks", fontsize=9)
        ax.set_xlabel("bytes", fontsize=8)
        ax.set_ylabel("busbw GB/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"# plot: {path}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: compare.py RESULTS_DIR")
    results = Path(sys.argv[1])
    skipped = {r[0]: r[1] for r in read_tsv(results / "skipped.tsv") if len(r) >= 2}
    runs = [r for r in read_tsv(results / "runs.tsv")[1:] if len(r) >= 5]
    slow, limit, probed = slow_runs(runs)
    raw = list(raw_runs(results))
    cells, order = load(raw, slow)
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
    if limit is not None:
        print(f"# slow state: {len(slow)} of {probed} runs had a cache-line round trip over"
              f" {limit:.0f} ns before or after them; a cell uses its other rounds"
              " where it has any")
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

    print_loops(load_loops(raw))

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

    if "transport: tcp" in (meta.read_text() if meta.exists() else ""):
        print_tcp_verdicts(all_stats, why)
    else:
        print(verdict("VERDICT 2 ranks: allreduce latency within 1.5x best peer for 8 B - 1 KiB",
                      all_stats.get(2), lambda op, b: op == "allreduce" and 8 <= b <= KIB,
                      PEERS, 1.5, why(2)))
        print(verdict("VERDICT 2 ranks: allreduce bandwidth >= best peer from 1 MiB",
                      all_stats.get(2), lambda op, b: op == "allreduce" and b >= MIB,
                      PEERS, 1.0, why(2)))
        print(verdict("VERDICT 4 ranks: no slower than Open MPI at any size (all ops)",
                      all_stats.get(4), lambda op, b: True, ["openmpi"], 1.0, why(4)))

        print_perf_verdicts(all_stats, why)
        floor = switch_floor(meta.read_text() if meta.exists() else "", 4, all_stats.get(4))
        if floor:
            print(floor)
    plot(all_stats, results / "busbw.png")

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
