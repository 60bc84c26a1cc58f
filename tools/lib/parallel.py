#!/usr/bin/env python3
"""tools/lib/parallel.py - the Python side of tools/bench-parallel: the workloads that run in
several processes at once, the rows they add to the run's CSV, the summary (computed from the
CSV alone, so a test can feed a known CSV) and the plot. Standard library only.

  parallel.py write DIR --procs N --total BYTES [--block BYTES]   N writers, one file each
  parallel.py create DIR --procs N --files N [--dirs N]           empty files in DIRS dirs
  parallel.py fill DIR --pct P --file-size BYTES                   files until P% is used
  parallel.py writer DIR --file-size BYTES --seconds S [--files N --random] [--rate B/s]
  parallel.py stat-cp DIR --files N --batch N --ctl CTL --mnt MNT stat p99 beside checkpoints
  parallel.py fio-rows FIO_JSON                                    a fio reader's figures
  parallel.py gc-rows STATS_BEFORE STATS_AFTER                     what GC did between two stats
  parallel.py summary CSV [--out FILE]
  parallel.py plot CSV PNG

The workload commands print their result as JSON; with --csv FILE --row V,R,M,C they also
append its figures to FILE as rows version,round,measure,case,metric,value,unit,note.

Every timed workload runs in processes, not threads (no interpreter lock between them): each
does its setup, waits at a common start line, and reports its own start and end; the time of
the whole is the last end minus the first start.
"""
import argparse
import array
import bisect
import csv
import json
import mmap
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time

from workloads import (MiB, free_bytes, gnuplot, load_checked, median, num, open_direct, pattern,
                       write_file, write_rows)

COLUMNS = ["version", "round", "measure", "case", "metric", "value", "unit", "note"]

# The ratios the summary reports: name, measure, metric, base case, loaded case, target, label.
# Each ratio is loaded / base, per round; the target says which side is good (None: none set).
RATIOS = [
    ("writers_4_vs_1", "writers", "MiBps", "one", "four", (">=", 1.5),
     "4 writers on 4 files / 1 writer, MiB/s"),
    ("creates_4_vs_1", "creates", "ops", "one", "four", (">=", 1.5),
     "creates by 4 processes in 4 dirs / 1 process, ops/s"),
    ("read_p99_seqwriter", "read-writer", "p99_us", "idle", "writer", ("<=", 2.0),
     "QD1 4K read p99, sequential writer / idle"),
    ("read_iops_seqwriter", "read-writer", "iops", "idle", "writer", None,
     "QD1 4K read IOPS, sequential writer / idle"),
    ("read_iops_gc", "read-gc", "iops", "idle", "gc", (">=", 0.9),
     "QD1 4K read IOPS, boosted GC + writer / idle"),
    ("read_p99_gc", "read-gc", "p99_us", "idle", "gc", ("<=", 1.5),
     "QD1 4K read p99, boosted GC + writer / idle"),
    ("read_iops_gc_vs_writer", "read-gc", "iops", "writer", "gc", None,
     "QD1 4K read IOPS, boosted GC + writer / writer alone (nogc)"),
    ("read_p99_gc_vs_writer", "read-gc", "p99_us", "writer", "gc", None,
     "QD1 4K read p99, boosted GC + writer / writer alone (nogc)"),
    ("stat_p99_checkpoint", "stat-cp", "p99_us", "idle", "checkpoint", None,
     "stat p99, during checkpoints / none running"),
    ("stat_p999_checkpoint", "stat-cp", "p999_us", "idle", "checkpoint", None,
     "stat p99.9, during checkpoints / none running"),
    ("stat_rate_checkpoint", "stat-cp", "rate", "idle", "checkpoint", None,
     "stat loop's stats/s, during checkpoints / none running"),
    ("stat_p99_changes", "stat-cp", "p99_us", "idle", "change", None,
     "stat p99, while inodes change / none"),
]


# ---- rows -------------------------------------------------------------------------------------
def add_rows(a, rows, case=None):
    """rows: (metric, value, unit[, note]); appended under a.row (version,round,measure,case),
    with CASE in place of its case if given."""
    if not a.csv:
        return
    tag = (a.row or "").split(",")
    if len(tag) != 4:
        sys.exit("parallel.py: --row takes version,round,measure,case")
    if case:
        tag[3] = case
    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    with open(a.csv, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if new:
            w.writerow(COLUMNS)
        for r in rows:
            m, v, u = r[:3]
            w.writerow(tag + [m, ("%.3f" % v) if isinstance(v, float) else v, u, r[3] if len(r) > 3 else ""])


def pct(s, q):
    """The q-th percentile of the sorted list s (nearest rank), or 0.0 when empty."""
    if not s:
        return 0.0
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def lat_figures(lat_ns):
    s = sorted(lat_ns)
    mean = sum(s) / len(s) / 1e3 if s else 0.0
    return {"samples": len(s), "mean_us": mean, "p50_us": pct(s, 50) / 1e3,
            "p99_us": pct(s, 99) / 1e3, "p999_us": pct(s, 99.9) / 1e3, "max_us": (s[-1] if s else 0) / 1e3}


# ---- processes that start together ------------------------------------------------------------
class Group:
    """N forked workers: each runs setup(i) -> state, waits for the start, then work(state) ->
    dict, and reports {t0, t1, ...}. run() returns the reports, or exits if any worker failed."""

    def __init__(self, n, setup, work):
        self.n, self.setup, self.work, self.pids = n, setup, work, []

    def child(self, i, ready_w, go_r, res_w):
        rep = {}
        try:
            state = self.setup(i)
            os.write(ready_w, b"r")
            if os.read(go_r, 1) != b"g":  # the start line was closed: another worker failed
                raise RuntimeError("stopped before the start")
            t0 = time.monotonic_ns()
            rep = self.work(state) or {}
            rep.update(t0=t0, t1=time.monotonic_ns())
            code = 0
        except BaseException as e:  # reported to the parent, which stops
            rep, code = {"error": "worker %d: %s" % (i, e)}, 1
            os.write(ready_w, b"e")
        os.write(res_w, (json.dumps(rep) + "\n").encode())
        os._exit(code)

    def run(self):
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            for i in range(self.n):
                pid = os.fork()
                if pid == 0:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    for fd in (ready_r, go_w, res_r):
                        os.close(fd)
                    self.child(i, ready_w, go_r, res_w)
                self.pids.append(pid)
            for fd in (ready_w, go_r, res_w):
                os.close(fd)
            got = b""
            while len(got) < self.n and b"e" not in got:
                b = os.read(ready_r, self.n)
                if not b:
                    break
                got += b
            if b"e" not in got:
                os.write(go_w, b"g" * self.n)
            os.close(go_w)
            buf = b""
            while True:
                b = os.read(res_r, 65536)
                if not b:
                    break
                buf += b
            reps = [json.loads(l) for l in buf.decode().splitlines() if l.strip()]
        except BaseException:
            self.stop()
            raise
        bad = [p for p in self.pids if os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) != 0]
        self.pids = []
        errs = [r["error"] for r in reps if "error" in r]
        if errs or bad or len(reps) != self.n:
            sys.exit("parallel.py: %s" % ("; ".join(errs) or "%d of %d workers failed" % (len(bad), self.n)))
        return reps

    def stop(self):
        for p in self.pids:
            try:
                os.kill(p, signal.SIGTERM)
                os.waitpid(p, 0)
            except OSError:
                pass
        self.pids = []


def span_s(reps):
    return (max(r["t1"] for r in reps) - min(r["t0"] for r in reps)) / 1e9


# ---- measurement 1: writers -------------------------------------------------------------------
def cmd_write(a):
    if a.total % (a.procs * a.block):
        sys.exit("parallel.py write: --total must be a multiple of procs x block")
    per = a.total // a.procs
    os.makedirs(a.dir, exist_ok=True)

    def setup(i):
        fd, direct = open_direct(os.path.join(a.dir, "w%d.dat" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        buf = mmap.mmap(-1, a.block)  # page aligned, for O_DIRECT
        buf.write(os.urandom(a.block))
        return fd, direct, buf

    def work(st):
        fd, direct, buf = st
        off = 0
        while off < per:
            n = os.write(fd, buf)
            if n != a.block:
                raise OSError("short write of %d bytes at %d" % (n, off))
            off += n
        os.fsync(fd)  # the figure includes making it durable: draining the daemon's buffer
        os.close(fd)
        return {"bytes": off, "direct": direct}

    reps = Group(a.procs, setup, work).run()
    s = span_s(reps)
    direct = all(r["direct"] for r in reps)
    res = {"procs": a.procs, "bytes": a.total, "seconds": s, "MiBps": a.total / MiB / s, "direct": direct}
    note = "" if direct else "buffered: O_DIRECT refused"
    add_rows(a, [("MiBps", res["MiBps"], "MiB/s", note), ("seconds", s, "s", note),
                 ("direct", int(direct), "")])
    print(json.dumps(res))


# ---- measurement 2: creates -------------------------------------------------------------------
def cmd_create(a):
    if a.dirs % a.procs or a.files % a.dirs:
        sys.exit("parallel.py create: --dirs must be a multiple of --procs, --files of --dirs")
    per_dir = a.files // a.dirs
    dirs = [os.path.join(a.dir, "d%d" % k) for k in range(a.dirs)]
    for d in dirs:
        os.makedirs(d)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY

    def setup(i):
        mine = dirs[i * a.dirs // a.procs:(i + 1) * a.dirs // a.procs]
        return [os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in mine], ["f%07d" % k for k in range(per_dir)]

    def work(st):
        dfds, names = st
        for dfd in dfds:  # a process with several directories fills them in turn
            for p in names:
                os.close(os.open(p, flags, 0o644, dir_fd=dfd))
            os.close(dfd)

    reps = Group(a.procs, setup, work).run()
    s = span_s(reps)
    res = {"procs": a.procs, "dirs": a.dirs, "files": a.files, "seconds": s, "ops": a.files / s}
    add_rows(a, [("ops", res["ops"], "ops/s"), ("seconds", s, "s")])
    print(json.dumps(res))


# ---- background writers, and filling a filesystem --------------------------------------------
def file_name(k):
    return "f%05d.dat" % k


def cmd_fill(a):
    """Files of FILE_SIZE in DIR, one after the other, until PCT% of the filesystem is used."""
    os.makedirs(a.dir, exist_ok=True)
    pat = pattern(3, a.block)
    k = 0
    while True:
        free, total = free_bytes(a.dir)
        if (total - free) + a.file_size > total * a.pct / 100.0:
            break
        write_file(os.path.join(a.dir, file_name(k)), a.file_size, a.block, pat, b"fill%d" % k, fsync=False)
        k += 1
    if k < 2:
        sys.exit("parallel.py fill: %g%% of %s leaves room for fewer than 2 files" % (a.pct, a.dir))
    free, total = free_bytes(a.dir)
    print(json.dumps({"files": k, "used_pct": 100.0 * (total - free) / total}))


def cmd_writer(a):
    """Write for SECONDS: over one file sequentially, again and again (--files 1), or whole
    files picked at random among FILES (--random); at most RATE bytes/s if given."""
    os.makedirs(a.dir, exist_ok=True)
    buf = mmap.mmap(-1, a.block)
    buf.write(os.urandom(a.block))
    fds = []
    for k in range(a.files):
        fd, direct = open_direct(os.path.join(a.dir, file_name(k)), os.O_WRONLY | os.O_CREAT)
        fds.append(fd)
    rnd = random.Random(a.seed)
    t0 = time.monotonic()
    end, done, off, fd = t0 + a.seconds, 0, 0, fds[0]
    while time.monotonic() < end:
        if off >= a.file_size:
            off = 0
            if a.random:
                fd = fds[rnd.randrange(len(fds))]
        os.pwrite(fd, buf, off)
        off += a.block
        done += a.block
        if a.rate:
            ahead = done / a.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    for fd in fds:
        os.fsync(fd)
        os.close(fd)
    s = time.monotonic() - t0
    res = {"bytes": done, "seconds": s, "MiBps": done / MiB / s, "direct": direct}
    add_rows(a, [("writer_MiBps", res["MiBps"], "MiB/s", "" if direct else "buffered: O_DIRECT refused")])
    print(json.dumps(res))


# ---- measurement 5: stat beside checkpoints ---------------------------------------------------
def ctl(a, *args):
    return subprocess.run([a.ctl] + list(args) + [a.mnt], capture_output=True, text=True, check=True).stdout


def cp_version(a):
    return json.loads(ctl(a, "stats"))["checkpoint_version"]


def stat_loop(dfd, names, out, stop):
    """Stat NAMES round robin until STOP (a pipe) is readable; the start time and latency of
    every stat (CLOCK_MONOTONIC ns, comparable with the parent's) go to OUT."""
    ts, lat = array.array("q"), array.array("q")
    n, i, stat, now = len(names), 0, os.stat, time.monotonic_ns
    while True:
        if i % 256 == 0 and select.select([stop], [], [], 0)[0]:
            break
        t0 = now()
        stat(names[i % n], dir_fd=dfd)
        ts.append(t0)
        lat.append(now() - t0)
        i += 1
    with open(out, "wb") as f:
        array.array("q", [len(ts)]).tofile(f)
        ts.tofile(f)
        lat.tofile(f)


def cmd_stat_cp(a):
    """Create FILES files in DIR, sync, stat them all once (warm), then with a stat loop
    running in another process: per batch of BATCH files, an idle window of IDLE seconds, a
    change window (utime of the batch: each inode dirtied), a checkpoint window (zlfs-ctl
    sync). Stats are classified by the window they started in."""
    os.makedirs(a.dir)
    dfd = os.open(a.dir, os.O_RDONLY | os.O_DIRECTORY)
    names = ["f%07d" % k for k in range(a.files)]
    for p in names:
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=dfd))
    ctl(a, "sync")
    t = time.monotonic()
    for p in names:
        os.stat(p, dir_fd=dfd)
    pass_s = time.monotonic() - t
    out = a.samples
    if not out:
        fd, out = tempfile.mkstemp(prefix="bench-parallel-stat.")
        os.close(fd)
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(stop_w)
        code = 0
        try:
            stat_loop(dfd, names, out, stop_r)
        except BaseException as e:
            print("parallel.py stat-cp: stat loop: %s" % e, file=sys.stderr)
            code = 1
        os._exit(code)
    os.close(stop_r)
    windows = []  # (t0, t1, kind)
    syncs, auto = [], 0
    try:
        time.sleep(0.2)
        for b in range(0, a.files, a.batch):
            t0 = time.monotonic_ns()
            time.sleep(a.idle)
            windows.append((t0, time.monotonic_ns(), "idle"))
            v0 = cp_version(a)
            t0 = time.monotonic_ns()
            stamp = time.time_ns()
            for p in names[b:b + a.batch]:
                os.utime(p, ns=(stamp, stamp), dir_fd=dfd)
            windows.append((t0, time.monotonic_ns(), "change"))
            v1 = cp_version(a)
            auto += v1 - v0
            t0 = time.monotonic_ns()
            ctl(a, "sync")
            t1 = time.monotonic_ns()
            windows.append((t0, t1, "checkpoint"))
            syncs.append((t1 - t0) / 1e6)
            if cp_version(a) <= v1:
                sys.exit("parallel.py stat-cp: zlfs-ctl sync wrote no checkpoint")
        time.sleep(a.idle)
    finally:
        os.write(stop_w, b"x")
        _, st = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(st) != 0:
        sys.exit("parallel.py stat-cp: the stat loop failed")
    with open(out, "rb") as f:
        n = array.array("q")
        n.fromfile(f, 1)
        ts, lat = array.array("q"), array.array("q")
        ts.fromfile(f, n[0])
        lat.fromfile(f, n[0])
    os.unlink(out)
    starts = [w[0] for w in windows]
    by = {"idle": [], "change": [], "checkpoint": []}
    for t, l in zip(ts, lat):
        k = bisect.bisect_right(starts, t) - 1
        if k >= 0 and t < windows[k][1]:
            by[windows[k][2]].append(l)
    res = {"files": a.files, "batch": a.batch, "checkpoints": len(syncs), "auto_checkpoints": auto,
           "sync_ms_median": median(syncs), "sync_ms_max": max(syncs), "stat_pass_s": pass_s,
           "stats": len(ts)}
    for k, v in by.items():
        res[k] = lat_figures(v)
        # one stat loop: a stat held up for a whole checkpoint is one sample, however long, so
        # the rate (stats started per second of the window) shows what a percentile may not
        res[k]["window_s"] = sum(w[1] - w[0] for w in windows if w[2] == k) / 1e9
        res[k]["rate"] = len(v) / res[k]["window_s"] if res[k]["window_s"] else 0.0
    os.close(dfd)
    print(json.dumps(res))
    for k in by:
        r = res[k]
        add_rows(a, [("p50_us", r["p50_us"], "us"), ("p99_us", r["p99_us"], "us"),
                     ("p999_us", r["p999_us"], "us"), ("max_us", r["max_us"], "us"),
                     ("mean_us", r["mean_us"], "us"), ("samples", r["samples"], "stats"),
                     ("window_s", r["window_s"], "s"), ("rate", r["rate"], "stats/s")], case=k)
    add_rows(a, [("checkpoints", len(syncs), ""), ("sync_ms_median", res["sync_ms_median"], "ms"),
                 ("sync_ms_max", res["sync_ms_max"], "ms")], case="checkpoint")
    add_rows(a, [("auto_checkpoints", auto, "", "written by the daemon itself while inodes changed")],
             case="change")
    add_rows(a, [("stat_pass_s", pass_s, "s", "one stat of every file, before the loop")], case="idle")


# ---- fio and zlfs-ctl stats -------------------------------------------------------------------
def load_json(path):
    text = open(path).read()
    return json.loads(text[text.index("{"):])  # fio may print notes before the JSON


def cmd_fio_rows(a):
    j = load_json(a.json)["jobs"][0]
    if j["error"]:
        sys.exit("fio %s: error %d" % (a.json, j["error"]))
    side = j["read"]
    p = side["clat_ns"].get("percentile", {})
    add_rows(a, [("iops", side["iops"], "IOPS"), ("p50_us", p.get("50.000000", 0) / 1e3, "us"),
                 ("p99_us", p.get("99.000000", 0) / 1e3, "us"),
                 ("p999_us", p.get("99.900000", 0) / 1e3, "us")])


def cmd_gc_rows(a):
    s0, s1 = load_json(a.before), load_json(a.after)
    g0, g1 = s0["gc"], s1["gc"]
    seen = [t["to"] for t in g1["transitions"] if t not in g0["transitions"]]
    phases = "|".join(dict.fromkeys([g0["phase"]] + seen + [g1["phase"]]))
    add_rows(a, [("gc_migrated_MiB", (g1["bytes_migrated"] - g0["bytes_migrated"]) / MiB, "MiB"),
                 ("gc_zones_reclaimed", g1["zones_reclaimed"] - g0["zones_reclaimed"], "zones"),
                 ("gc_busy_ms", g1["busy_ms"] - g0["busy_ms"], "ms"),
                 ("free_zones", s1["zones"]["free"], "zones", "at the end"),
                 ("gc_phases", len(phases.split("|")), "", phases)])


# ---- the summary ------------------------------------------------------------------------------
def figures(rows):
    """{(version, round, measure, case, metric): value} of the numeric rows."""
    out = {}
    for r in rows:
        v = num(r, "value")
        if v is not None:
            out[(r["version"], int(r["round"]), r["measure"], r["case"], r["metric"])] = v
    return out


def ratios(rows):
    """[(version, name, base, loaded, ratio, rounds)]: base and loaded are medians over the
    rounds, ratio the median of the per-round ratios (each round's pair ran side by side)."""
    f = figures(rows)
    versions = list(dict.fromkeys(r["version"] for r in rows if r["version"] != "-"))
    out = []
    for v in versions:
        for name, m, metric, bc, lc, _, _ in RATIOS:
            rs = sorted({k[1] for k in f if k[0] == v and k[2] == m})
            pairs = [(f[(v, r, m, bc, metric)], f[(v, r, m, lc, metric)]) for r in rs
                     if (v, r, m, bc, metric) in f and (v, r, m, lc, metric) in f]
            pairs = [(b, l) for b, l in pairs if b > 0]
            if pairs:
                out.append((v, name, median([b for b, _ in pairs]), median([l for _, l in pairs]),
                            median([l / b for b, l in pairs]), len(pairs)))
    return out


def cmd_summary(a):
    rows = load_checked(a.csv, COLUMNS, "bench-parallel")
    meta = {n: (m, metric, bc, lc, t, l) for n, m, metric, bc, lc, t, l in RATIOS}
    res = ratios(rows)
    print("Parallel work: %s (figures: medians over rounds; ratio: median of the per-round"
          " loaded/base ratios)" % a.csv)
    print("  %-60s %-10s %12s %12s %8s  %s" % ("ratio", "version", "base", "loaded", "ratio", "target"))
    out = []
    for name in [r[0] for r in RATIOS]:
        for v, n, b, l, x, k in res:
            if n != name:
                continue
            m, metric, bc, lc, t, label = meta[n]
            tgt = "" if not t else "%s %g: %s" % (t[0], t[1], "met" if (x >= t[1] if t[0] == ">=" else x <= t[1]) else "not met")
            print("  %-60s %-10s %12.1f %12.1f %7.3fx  %s" % (label, v, b, l, x, tgt))
            out.append((v, n, "%.3f" % b, "%.3f" % l, "%.3f" % x, "%s %g" % t if t else "", k))
    f = figures(rows)
    h = [(f[k], f[k[:3] + ("four", "ops")]) for k in f
         if k[0] == "-" and k[2] == "harness" and k[3:] == ("one", "ops") and k[:3] + ("four", "ops") in f]
    if h:
        best = max([l for v, n, b, l, x, k in res if n == "creates_4_vs_1"] + [0])
        h1, h4 = median([x for x, _ in h]), median([y for _, y in h])
        print("  harness: the same create loop on tmpfs (no FUSE), %d round(s): 1 process %.0f ops/s, 4"
              " processes %.0f ops/s, 4/1 %.3fx (there the loop is all CPU: near 1, the machine had no"
              " core to spare for the extra processes); the best zlfs figure above is %.1f%% of the"
              " 4-process one"
              % (len(h), h1, h4, median([y / x for x, y in h if x > 0]), 100.0 * best / h4))
    for (v, r, m, c, metric), val in sorted(f.items()):
        passed = f.get((v, r, m, c, "stat_pass_s"))
        if metric == "kernel_timeout_s" and val > 0 and passed is not None and passed < 1.5 * val:
            print("  note: %s round %d: stat-cp: the kernel keeps attributes %g s and a stat pass took"
                  " %.2f s: some stats did not reach the daemon" % (v, r, val, passed))
    notes = [r for r in rows if r["note"] and r["metric"] in ("gc_phases", "MiBps")]
    for r in notes:
        if r["metric"] == "gc_phases" and r["measure"] == "read-gc" and r["case"] != "idle" and r["note"] != "boosted":
            print("  note: %s round %s: read-gc %s: GC phases during the reads: %s (not boosted throughout)"
                  % (r["version"], r["round"], r["case"], r["note"]))
        if r["metric"] == "gc_phases" and r["measure"] == "read-writer" and "foreground" in r["note"]:
            print("  note: %s round %s: read-writer %s: foreground GC ran during the reads (phases %s)"
                  % (r["version"], r["round"], r["case"], r["note"]))
        if r["metric"] == "MiBps":
            print("  note: %s round %s %s %s: %s" % (r["version"], r["round"], r["measure"], r["case"], r["note"]))
    if a.out:
        write_rows(a.out, ["version", "ratio", "base", "loaded", "value", "target", "rounds"], out)


def cmd_plot(a):
    rows = load_checked(a.csv, COLUMNS, "bench-parallel")
    res = ratios(rows)
    versions = list(dict.fromkeys(v for v, *_ in res))
    names = [r[0] for r in RATIOS if any(n == r[0] for _, n, *_ in res)]
    tmp = a.png + ".d"
    os.makedirs(tmp, exist_ok=True)
    w = 0.8 / max(1, len(versions))
    plots = []
    for j, v in enumerate(versions):
        p = os.path.join(tmp, "v%d.dat" % j)
        with open(p, "w") as f:
            for i, n in enumerate(names):
                for vv, nn, b, l, x, k in res:
                    if vv == v and nn == n:
                        f.write("%g %g\n" % (i + (j - (len(versions) - 1) / 2.0) * w, x))
        # a box from 1 to the ratio: up when loaded is above base, down when below
        plots.append("'%s' using 1:2:($1-%g):($1+%g):(1):2 with boxxyerror fs solid 0.7 title '%s'"
                     % (p, w / 2, w / 2, v))
    t = os.path.join(tmp, "targets.dat")
    with open(t, "w") as f:
        for i, n in enumerate(names):
            tg = [r[5] for r in RATIOS if r[0] == n][0]
            if tg:
                f.write("%d %g\n" % (i, tg[1]))
    if os.path.getsize(t):
        plots.append("'%s' using 1:2:(0.45) with xerrorbars pt 0 lw 2 lc rgb 'black' title 'target'" % t)
    tics = ", ".join('"%s" %d' % (n.replace("_", " "), i) for i, n in enumerate(names))
    script = """set terminal pngcairo noenhanced size 1100,600 font ',10'
set output '%s'
set title "bench-parallel: loaded / base (median of the rounds), a bar from 1; black: the target\\n(p99: lower is better; IOPS, ops/s, MiB/s: higher is better)"
set style fill solid 0.7 border -1
set logscale y 2
set grid ytics
set xrange [-0.6:%g]
set xtics rotate by -30 (%s)
set ylabel 'ratio (log scale)'
set key top right
set arrow from -0.6,1 to %g,1 nohead dt 2
plot %s
""" % (a.png, len(names) - 0.4, tics, len(names) - 0.4, ", ".join(plots))
    gnuplot(script, a.png)
    for n in os.listdir(tmp):
        os.unlink(os.path.join(tmp, n))
    os.rmdir(tmp)


def on_term(signum, frame):
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, on_term)  # the script stops a workload with TERM: clean up as for ^C
    ap = argparse.ArgumentParser(prog="parallel.py")
    sp = ap.add_subparsers(dest="cmd", required=True)

    def sub(name, fn, *pos):
        p = sp.add_parser(name)
        for x in pos:
            p.add_argument(x)
        p.add_argument("--csv", help="append the figures to this CSV")
        p.add_argument("--row", help="version,round,measure,case of those rows")
        p.set_defaults(fn=fn)
        return p

    p = sub("write", cmd_write, "dir")
    p.add_argument("--procs", type=int, required=True)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--block", type=int, default=1 << 20)
    p = sub("create", cmd_create, "dir")
    p.add_argument("--procs", type=int, required=True)
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--dirs", type=int, default=4)
    p = sub("fill", cmd_fill, "dir")
    p.add_argument("--pct", type=float, required=True)
    p.add_argument("--file-size", type=int, required=True)
    p.add_argument("--block", type=int, default=1 << 20)
    p = sub("writer", cmd_writer, "dir")
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--file-size", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--rate", type=int, default=0, help="bytes/s at most (0: no limit)")
    p.add_argument("--random", action="store_true", help="overwrite random whole files")
    p.add_argument("--block", type=int, default=1 << 20)
    p.add_argument("--seed", type=int, default=1)
    p = sub("stat-cp", cmd_stat_cp, "dir")
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--idle", type=float, default=1.0, help="seconds of each idle window")
    p.add_argument("--ctl", required=True)
    p.add_argument("--mnt", required=True)
    p.add_argument("--samples", help="scratch file of the stat loop (default: a temporary file)")
    sub("fio-rows", cmd_fio_rows, "json")
    sub("gc-rows", cmd_gc_rows, "before", "after")
    p = sp.add_parser("summary")
    p.add_argument("csv")
    p.add_argument("--out", help="also write the ratios as CSV")
    p.set_defaults(fn=cmd_summary)
    p = sp.add_parser("plot")
    p.add_argument("csv")
    p.add_argument("png")
    p.set_defaults(fn=cmd_plot)
    a = ap.parse_args()
    try:
        a.fn(a)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
