#!/usr/bin/python3
"""Side-by-side collective bandwidth of Braid, Open MPI, MPICH and Gloo on this host.

Runs braid-perf and the peer programs of perf/peers (built with -Dpeers=true) over the same
message sizes, rank counts and collectives, then writes:

  compare.md    one table per collective and rank count: busbw (GB/s) per library, per size,
                and the time of the smallest message (latency)
  compare.json  every measurement (both placements) with the commands and the host's load
  compare.png   busbw against message size, one panel per collective and rank count
  logs/         the full nccl-tests style output of every run

It installs nothing: it checks which libraries are present and skips the others, saying why.
Gloo runs inside a private network namespace (unshare -n) whose loopback route has quickack 1,
so that delayed ACKs do not stall its small messages; the host's own network is untouched.
"""

import argparse
import datetime
import json
import math
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time

COLLECTIVES = ["allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"]
GLOO_ALLREDUCE_ALGOS = ["default", "ring", "ring_chunked", "halving_doubling", "bcube"]

# Commands run inside the Gloo namespace before the program: bring loopback up and turn on
# quickack for both local routes (127.0.0.1 has its own /32 route, which wins over the /8).
NETNS_SETUP = (
    "ip link set lo up && "
    "ip route change local 127.0.0.1 dev lo proto kernel scope host src 127.0.0.1 "
    "table local quickack 1 && "
    "ip route change local 127.0.0.0/8 dev lo proto kernel scope host src 127.0.0.1 "
    "table local quickack 1"
)

SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """'8', '64K', '256M', '1G' -> bytes (binary multiples, as braid-perf reads them)."""
    t = text.strip().upper().removesuffix("B")
    unit = t[-1:] if t[-1:] in SUFFIXES and t[-1:] != "" else ""
    number = t[: len(t) - len(unit)] if unit else t
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(number) * SUFFIXES[unit]


def size_text(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}B"
    return f"{size} B"


def size_segments(minbytes, maxbytes, factor, below):
    """The sweep minbytes, minbytes*factor, ... <= maxbytes split at `below`: [(first, last)] of
    the sizes under it and of the rest (either omitted when empty; one segment when below is 0)."""
    sizes = []
    size = minbytes
    while size <= maxbytes:
        sizes.append(size)
        if factor <= 1:
            break
        size *= factor
    small = [s for s in sizes if s < below]
    large = [s for s in sizes if s >= below]
    return [(part[0], part[-1]) for part in (small, large) if part]


def int_list(text):
    return [int(v) for v in text.split(",") if v]


def name_list(text):
    return [v.strip() for v in text.split(",") if v.strip()]


class Library:
    """One column of the comparison: a program and how to launch it for n ranks."""

    def __init__(self, key, label, collectives, build):
        self.key = key
        self.label = label
        self.collectives = collectives
        self.build = build  # build(collective, n, flags, json_path) -> argv
        self.missing = None  # why it cannot run, or None
        self.version = None  # from the program's first output line

    def command(self, collective, n, flags, json_path):
        return self.build(collective, n, flags, json_path)


def braid_library(build_dir, shared=False):
    """braid-perf; with shared, its buffers come from braidMemAlloc (-R 1)."""
    program = os.path.join(build_dir, "perf", "braid-perf")
    extra = ["-R", "1"] if shared else []
    lib = Library("braid-shared" if shared else "braid",
                  "Braid (braidMemAlloc buffers)" if shared else "Braid", COLLECTIVES,
                  lambda c, n, flags, js: [program, c, "--np", str(n), *extra, *flags,
                                           "--json", js])
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                              "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    try:
        built = datetime.datetime.fromtimestamp(os.path.getmtime(program)).astimezone()
        built_text = f", built {built.isoformat(timespec='minutes')}"
    except OSError:
        built_text = ""
    # The program is whatever the build directory holds: say when it was built, and what the
    # work tree is now (it may have moved on since).
    lib.version = (f"braid-perf of {build_dir}{built_text}"
                   + (f"; work tree now at git {rev}" if rev else ""))
    if not os.access(program, os.X_OK):
        lib.missing = f"{program} not built (ninja -C {build_dir})"
    return lib


def ompi_library(build_dir):
    program = os.path.join(build_dir, "perf", "peers", "braid-peer-ompi")
    launcher = shutil.which("mpirun.openmpi")

    def build(c, n, flags, js):
        argv = [launcher, "-np", str(n), "--oversubscribe",
                # shared memory only: the ob1 PML over the vader BTL, single copy through CMA
                "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
                "--mca", "btl_vader_single_copy_mechanism", "cma"]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        return argv + [program, c, *flags, "--json", js]

    lib = Library("ompi", "Open MPI", COLLECTIVES, build)
    if launcher is None:
        lib.missing = "mpirun.openmpi not found (apt-get install openmpi-bin libopenmpi-dev)"
    elif not os.access(program, os.X_OK):
        lib.missing = f"{program} not built (meson configure {build_dir} -Dpeers=true)"
    return lib


def mpich_library(build_dir):
    program = os.path.join(build_dir, "perf", "peers", "braid-peer-mpich")
    launcher = shutil.which("mpiexec.mpich") or shutil.which("mpiexec.hydra")
    lib = Library("mpich", "MPICH", COLLECTIVES,
                  lambda c, n, flags, js: [launcher, "-n", str(n), program, c, *flags,
                                           "--json", js])
    if launcher is None:
        lib.missing = "mpiexec.mpich not found (apt-get install mpich libmpich-dev)"
    elif not os.access(program, os.X_OK):
        lib.missing = f"{program} not built (meson configure {build_dir} -Dpeers=true)"
    return lib


def gloo_library(build_dir, algo, netns):
    program = os.path.join(build_dir, "perf", "peers", "braid-peer-gloo")
    collectives = COLLECTIVES if algo == "default" else ["allreduce"]

    def build(c, n, flags, js):
        chosen = ["--algo", algo] if algo != "default" else []
        argv = [program, c, "--np", str(n), *chosen, *flags, "--json", js]
        if netns:
            return ["unshare", "-n", "sh", "-c", NETNS_SETUP + ' && exec "$@"', "sh", *argv]
        return argv

    label = "Gloo" if algo == "default" else f"Gloo {algo}"
    lib = Library("gloo" if algo == "default" else f"gloo-{algo}", label, collectives, build)
    if not os.access(program, os.X_OK):
        lib.missing = f"{program} not built (apt-get install libgloo-dev; -Dpeers=true)"
    return lib


def check_netns():
    """Whether a private namespace with a quickack loopback route can be made here."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False, "unshare or ip not found (util-linux, iproute2)"
    probe = ["unshare", "-n", "sh", "-c", NETNS_SETUP + " && ip route get 127.0.0.1"]
    try:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    if out.returncode != 0 or "quickack 1" not in out.stdout:
        return False, (out.stderr or out.stdout).strip() or f"exit status {out.returncode}"
    return True, "private namespace, lo route quickack 1"


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def cpu_busy(seconds=1.0):
    """Fraction of the host's CPU time spent busy over `seconds` (from /proc/stat), or None."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle
    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1.0 - (idle1 - idle0) / total


def wait_for_quiet(max_busy, max_wait):
    """Waits (at most max_wait seconds) until the host is at most max_busy busy; returns the
    last busy fraction seen and the seconds waited."""
    start = time.monotonic()
    busy = cpu_busy()
    while (busy is not None and busy > max_busy and time.monotonic() - start < max_wait):
        time.sleep(4)
        busy = cpu_busy()
    return busy, time.monotonic() - start


def cpu_counters():
    """(busy seconds of the whole host, CPU seconds of this script's finished children)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, children.ru_utime + children.ru_stime


def run_one(argv, log_path, timeout):
    """Runs argv in its own process group. Returns (exit status or "timeout", seconds, share of
    the host's CPU time that other processes took meanwhile, or None)."""
    start = time.monotonic()
    before = cpu_counters()
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the run's own process group goes with us.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    seconds = time.monotonic() - start
    after = cpu_counters()
    others = None
    if before and after and seconds > 0:
        # The benchmark's ranks are reaped by their launcher, so their time is in ours.
        ours = after[1] - before[1]
        others = max(0.0, (after[0] - before[0] - ours) / (seconds * (os.cpu_count() or 1)))
    return rc, seconds, others


def header_version(log_path):
    """The library description a peer program prints first ('# braid-peer-ompi: Open MPI...')."""
    with open(log_path) as log:
        for line in log:
            if line.startswith("# braid-peer-") and ": " in line:
                return line.split(": ", 1)[1].strip()
    return None


def pick(measurements, placement):
    """One busbw/time per size from a run's measurements: out-of-place, in-place or the better."""
    by_size = {}
    for m in measurements:
        by_size.setdefault(m["size"], []).append(m)
    chosen = {}
    for size, ms in by_size.items():
        if placement == "out":
            ms = [m for m in ms if not m["in_place"]]
        elif placement == "in":
            ms = [m for m in ms if m["in_place"]]
        if not ms:
            continue
        best = max(ms, key=lambda m: (m["busbw"] or 0.0, -(m["time_us"] or 0.0)))
        wrong = sum((m["wrong"] or 0) for m in by_size[size])
        chosen[size] = {"busbw": best["busbw"], "time_us": best["time_us"],
                        "in_place": best["in_place"], "wrong": wrong}
    return chosen


def format_busbw(cell):
    if cell is None:
        return "-"
    text = f"{cell['busbw']:.2f}"
    return text + (" (!)" if cell["wrong"] else "")


def format_us(us):
    if us is None:
        return "-"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.2f} us"


def table_runs(runs, library, coll, n):
    """The runs of one library that make one table (small sizes and the rest run apart)."""
    return [r for r in runs
            if r["library"] == library and r["collective"] == coll and r["nranks"] == n]


def markdown_tables(runs, libraries, placement, max_busy=0.25):
    """One Markdown table per (collective, n): size rows, one busbw column per library."""
    out = []
    groups = []
    for r in runs:
        key = (r["collective"], r["nranks"])
        if key not in groups:
            groups.append(key)
    for coll, n in groups:
        cols = [lib for lib in libraries
                if any(r["library"] == lib.key and r["collective"] == coll and r["nranks"] == n
                       for r in runs)]
        picked = {}
        notes = []
        for lib in cols:
            parts = table_runs(runs, lib.key, coll, n)
            picked[lib.key] = pick([m for r in parts for m in r["measurements"]], placement)
            for run in parts:
                if run["status"] != 0:
                    notes.append(f"{lib.label}: {run['status_text']}")
                others = run.get("cpu_others_during")
                if others is not None and others > max_busy:
                    notes.append(f"{lib.label}: other processes took {100 * others:.0f}% of "
                                 "the CPUs during one of its runs: its numbers are low")
        sizes = sorted({s for p in picked.values() for s in p})
        out.append(f"### {coll}, n = {n}: busbw (GB/s)\n")
        out.append("| size | " + " | ".join(lib.label for lib in cols) + " |")
        out.append("| ---: | " + " | ".join("---:" for _ in cols) + " |")
        for size in sizes:
            cells = [format_busbw(picked[lib.key].get(size)) for lib in cols]
            out.append(f"| {size_text(size)} | " + " | ".join(cells) + " |")
        if sizes:
            smallest = next((s for s in sizes if s > 0), sizes[0])
            times = [format_us((picked[lib.key].get(smallest) or {}).get("time_us"))
                     for lib in cols]
            out.append(f"| **time at {size_text(smallest)}** | " + " | ".join(times) + " |")
        out.append("")
        for note in notes:
            out.append(f"- {note}")
        if notes:
            out.append("")
    return "\n".join(out)


def plot(runs, libraries, placement, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib not found (apt-get install python3-matplotlib; run /usr/bin/python3)"
    groups = []
    for r in runs:
        key = (r["collective"], r["nranks"])
        if key not in groups:
            groups.append(key)
    if not groups:
        return "nothing measured"
    ncols = min(3, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False)
    styles = {}
    for i, lib in enumerate(libraries):
        styles[lib.key] = {"color": f"C{i}", "marker": "os^vD<>ph*"[i % 10]}
    for ax, (coll, n) in zip(axes.flat, groups):
        for lib in libraries:
            parts = table_runs(runs, lib.key, coll, n)
            if not parts:
                continue
            picked = pick([m for r in parts for m in r["measurements"]], placement)
            xs = sorted(s for s in picked if s > 0)
            if not xs:
                continue
            ax.plot(xs, [picked[s]["busbw"] for s in xs], label=lib.label, markersize=3,
                    linewidth=1.2, **styles[lib.key])
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=4))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
            lambda x, _pos: size_text(int(round(x))).replace(" ", "")))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(f"{coll}, n = {n}")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    fig.suptitle(f"busbw, float32 sum, {placement_text(placement)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def placement_text(placement):
    return {"out": "out-of-place", "in": "in-place",
            "best": "better of out-of-place and in-place"}[placement]


def measure(lib, coll, n, argv, json_path, log_path, stem, args):
    """One library's run of one table: waits for a quiet host, runs, and runs again (up to
    --retries times) when other processes took more than --max-busy of the CPUs meanwhile."""
    waited_total = 0.0
    for attempt in range(args.retries + 1):
        if os.path.exists(json_path):
            os.remove(json_path)
        busy, waited = (None, 0.0)
        if args.max_busy < 1:
            busy, waited = wait_for_quiet(args.max_busy, args.max_wait)
        waited_total += waited
        load_before = load_average()
        rc, seconds, others = run_one(argv, log_path, args.timeout)
        load_after = load_average()
        measurements = []
        if os.path.exists(json_path):
            with open(json_path) as f:
                measurements = json.load(f).get("measurements", [])
        lib.version = lib.version or header_version(log_path)
        if rc == 0:
            status_text = "ok"
        elif rc == 1:
            status_text = "WRONG VALUES (see log)"
        elif rc == "timeout":
            status_text = f"timed out after {args.timeout:g} s"
        else:
            status_text = f"failed, exit status {rc} (see {log_path})"
        busy_text = "?" if busy is None else f"{100 * busy:.0f}%"
        others_text = "?" if others is None else f"{100 * others:.0f}%"
        print(f"{stem:28s} {status_text:6s} {seconds:7.1f} s  others' CPU: before "
              f"{busy_text:>4s} (waited {waited:.0f} s), during {others_text:>4s}  load "
              f"{load_before[0] if load_before else float('nan'):.2f} -> "
              f"{load_after[0] if load_after else float('nan'):.2f}", flush=True)
        disturbed = others is not None and others > args.max_busy and args.max_busy < 1
        if rc == 0 and disturbed and attempt < args.retries:
            print(f"{'':28s} disturbed by other work: again", flush=True)
            continue
        break
    return {"library": lib.key, "label": lib.label, "collective": coll, "nranks": n,
            "command": argv, "status": rc if rc != "timeout" else -1,
            "status_text": status_text, "seconds": round(seconds, 2), "attempts": attempt + 1,
            "cpu_busy_before": busy, "cpu_others_during": others,
            "waited_s": round(waited_total, 1), "load_before": load_before,
            "load_after": load_after, "log": os.path.relpath(log_path, args.out),
            "measurements": measurements}


def write_outputs(runs, libraries, present, args, meta_base):
    """compare.json, compare.md and compare.png from the runs so far (rewritten after each run,
    so that an interrupted comparison still leaves its tables)."""
    finished = datetime.datetime.now().astimezone()
    started = meta_base["started"]
    command = meta_base["command"]
    netns_ok, netns_text = meta_base["netns"]
    busies = [r["cpu_busy_before"] for r in runs if r["cpu_busy_before"] is not None]
    during = [r["cpu_others_during"] for r in runs if r["cpu_others_during"] is not None]
    loads = [r["load_before"][0] for r in runs if r["load_before"]]
    loads += [r["load_after"][0] for r in runs if r["load_after"]]
    meta = {
        "command": command,
        "started": started.isoformat(timespec="seconds"),
        "complete": meta_base["complete"],
        "finished": finished.isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "load_1min_min": min(loads) if loads else None,
        "load_1min_max": max(loads) if loads else None,
        "cpu_busy_before_min": min(busies) if busies else None,
        "cpu_busy_before_max": max(busies) if busies else None,
        "cpu_others_during_min": min(during) if during else None,
        "cpu_others_during_max": max(during) if during else None,
        "placement": args.placement,
        "gloo_network": netns_text if netns_ok else "host namespace: " + netns_text,
        "libraries": {lib.key: {"label": lib.label, "version": lib.version,
                                "missing": lib.missing} for lib in libraries},
        "flags": {"iters": args.iters, "warmup": args.warmup, "small_below": args.small_below,
                  "small_iters": args.small_iters, "small_warmup": args.small_warmup,
                  "check": args.check,
                  "dtype": "float", "op": "sum"},
    }
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)

    plot_error = plot(runs, present, args.placement, os.path.join(args.out, "compare.png"))
    lines = ["# Braid and its peers: collective busbw on one host", "",
             f"- command: `{command}`",
             f"- when: {meta['started']} .. {meta['finished']} on {meta['host']} "
             f"({meta['cpus']} CPUs, Linux {meta['kernel']})"
             + ("" if meta["complete"] else " - INCOMPLETE: still running or interrupted"),
             f"- 1-minute load average during the runs: {meta['load_1min_min']:.2f} .. "
             f"{meta['load_1min_max']:.2f}" if loads else "- load: unknown",
             f"- CPU busy with other work just before each run: {100 * min(busies):.0f}% .. "
             f"{100 * max(busies):.0f}% (limit {100 * args.max_busy:.0f}%, "
             f"waited {sum(r['waited_s'] for r in runs):.0f} s in all)" if busies
             else "- CPU busy before runs: not checked",
             f"- CPU taken by other processes during each run: {100 * min(during):.0f}% .. "
             f"{100 * max(during):.0f}% ("
             + (f"runs above {100 * args.max_busy:.0f}% were repeated up to {args.retries} "
                "times; " if args.max_busy < 1 and args.retries > 0 else "")
             + "`cpu_others_during` per run in compare.json)" if during
             else "- CPU taken by other processes during the runs: unknown",
             f"- float32 sum, {args.iters} timed + {args.warmup} warm-up iterations per size"
             + (f" ({args.small_iters} + {args.small_warmup} under {size_text(args.small_below)})"
                if args.small_iters > 0 else "") + ", "
             f"time averaged over ranks; busbw as nccl-tests; the table shows the "
             f"{placement_text(args.placement)}; (!) marks sizes with wrong values",
             f"- Gloo network: {meta['gloo_network']}"]
    for lib in libraries:
        ran = any(r["library"] == lib.key for r in runs)
        what = ("not run: " + lib.missing if lib.missing
                else (lib.version or "") if ran else "no run (allreduce only)")
        lines.append(f"- {lib.label}: {what}")
    if plot_error:
        lines.append(f"- plot: not written ({plot_error})")
    lines += ["", markdown_tables(runs, present, args.placement, args.max_busy)]
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return plot_error


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(root, "build-peers"),
                    help="meson build directory configured with -Dpeers=true "
                         "(default: %(default)s)")
    ap.add_argument("--out", default=None,
                    help="directory for compare.md/.json/.png and logs "
                         "(default: BUILD/peers-results)")
    ap.add_argument("--np", type=int_list, default=[2, 3, 4],
                    help="rank counts for allreduce (default: 2,3,4)")
    ap.add_argument("-b", "--minbytes", type=parse_size, default=8,
                    help="allreduce smallest size (default 8)")
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=256 << 20,
                    help="largest size (default 256M)")
    ap.add_argument("-f", "--stepfactor", type=int, default=2, help="allreduce size factor")
    ap.add_argument("--collectives", type=name_list,
                    default=["broadcast", "reduce", "allgather", "reducescatter", "alltoall"],
                    help="other collectives to measure (default: all five; '' for none)")
    ap.add_argument("--other-np", type=int_list, default=[4],
                    help="rank counts for the other collectives (default: 4)")
    ap.add_argument("--other-minbytes", type=parse_size, default=64,
                    help="their smallest total size (default 64: 8 B would be 0 elements "
                         "per rank block at n=4)")
    ap.add_argument("--other-stepfactor", type=int, default=4, help="their size factor (4)")
    ap.add_argument("--libraries", type=name_list,
                    default=["braid", "ompi", "mpich", "gloo-ring", "gloo"],
                    help="columns: braid, braid-shared (braid-perf -R 1: buffers from "
                         "braidMemAlloc), ompi, mpich, gloo (gloo::allreduce), gloo-ALGO with "
                         f"ALGO in {', '.join(GLOO_ALLREDUCE_ALGOS[1:])} (allreduce only)")
    ap.add_argument("-n", "--iters", type=int, default=20,
                    help="timed iterations (20) of sizes from --small-below up")
    ap.add_argument("-w", "--warmup", type=int, default=5, help="warm-up iterations (5)")
    ap.add_argument("--small-below", type=parse_size, default=64 << 10,
                    help="sizes under this run apart, with --small-iters (default 64K)")
    ap.add_argument("--small-iters", type=int, default=1000,
                    help="timed iterations of those sizes (1000; 0: like the others). Twenty "
                         "calls of a microsecond time the ranks' uneven start more than the "
                         "calls")
    ap.add_argument("--small-warmup", type=int, default=100,
                    help="their warm-up iterations (100)")
    ap.add_argument("-c", "--check", type=int, default=1, help="verified runs per size (1)")
    ap.add_argument("--placement", choices=["best", "out", "in"], default="best",
                    help="which placement the table and plot show (default: the better one; "
                         "the JSON keeps both)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (1800)")
    ap.add_argument("--max-busy", type=float, default=0.25,
                    help="before each run, wait until the host's CPUs are at most this busy "
                         "(fraction over 1 s, other users' work; default 0.25; 1 to not wait)")
    ap.add_argument("--max-wait", type=float, default=300,
                    help="longest wait for that, in seconds, before running anyway (300)")
    ap.add_argument("--retries", type=int, default=2,
                    help="runs again (at most this many times) a run during which other "
                         "processes took more than --max-busy of the CPUs (default 2)")
    ap.add_argument("--no-netns", action="store_true",
                    help="run Gloo in the host's network namespace")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so that a running benchmark is killed with the script.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.out is None:
        args.out = os.path.join(args.build, "peers-results")

    netns_ok, netns_text = (False, "disabled (--no-netns)")
    if not args.no_netns:
        netns_ok, netns_text = check_netns()
    libraries = []
    for key in args.libraries:
        if key in ("braid", "braid-shared"):
            libraries.append(braid_library(args.build, shared=key == "braid-shared"))
        elif key == "ompi":
            libraries.append(ompi_library(args.build))
        elif key == "mpich":
            libraries.append(mpich_library(args.build))
        elif key == "gloo" or key.startswith("gloo-"):
            algo = "default" if key == "gloo" else key[len("gloo-"):]
            if algo not in GLOO_ALLREDUCE_ALGOS:
                ap.error(f"unknown Gloo algorithm in {key!r}")
            libraries.append(gloo_library(args.build, algo, netns_ok))
        else:
            ap.error(f"unknown library {key!r}")
    for coll in args.collectives:
        if coll not in COLLECTIVES:
            ap.error(f"unknown collective {coll!r}")

    for lib in libraries:
        print(f"{lib.label:18s} {'MISSING: ' + lib.missing if lib.missing else 'ok'}")
    if any(lib.key.startswith("gloo") and not lib.missing for lib in libraries):
        print(f"{'Gloo network':18s} {netns_text if netns_ok else 'host namespace: ' + netns_text}")
    present = [lib for lib in libraries if not lib.missing]

    plan = [("allreduce", n, args.minbytes, args.stepfactor) for n in args.np]
    plan += [(c, n, args.other_minbytes, args.other_stepfactor)
             for c in args.collectives if c != "allreduce" for n in args.other_np]
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    meta_base = {
        "started": datetime.datetime.now().astimezone(),
        "command": "perf/peers/compare.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "netns": (netns_ok, netns_text),
    }
    runs = []
    below = args.small_below if args.small_iters > 0 else 0
    for coll, n, minbytes, factor, (first, last) in [
            (c, n, b, f, seg) for c, n, b, f in plan
            for seg in size_segments(b, args.maxbytes, f, below)]:
        small = first < below
        iters, warmup = (args.small_iters, args.small_warmup) if small else (args.iters,
                                                                              args.warmup)
        flags = ["-b", str(first), "-e", str(last), "-f", str(factor),
                 "-n", str(iters), "-w", str(warmup), "-c", str(args.check),
                 "-d", "float", "-o", "sum"]
        # Interleaved by (collective, n, sizes), so that a change in the host's load hits every
        # library of one table alike.
        for lib in present:
            if coll not in lib.collectives:
                continue
            stem = f"{coll}-n{n}-{lib.key}" + ("-small" if small else "")
            json_path = os.path.abspath(os.path.join(args.out, "logs", stem + ".json"))
            log_path = os.path.join(args.out, "logs", stem + ".txt")
            argv_ = lib.command(coll, n, flags, json_path)
            if args.dry_run:
                print(shlex.join(argv_))
                continue
            runs.append(measure(lib, coll, n, argv_, json_path, log_path, stem, args))
            write_outputs(runs, libraries, present, args, dict(meta_base, complete=False))
    if args.dry_run:
        return 0
    plot_error = write_outputs(runs, libraries, present, args, dict(meta_base, complete=True))
    print(f"wrote {args.out}/compare.md, compare.json"
          + ("" if plot_error else ", compare.png") + " and logs/")
    failed = [r for r in runs if r["status"] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
