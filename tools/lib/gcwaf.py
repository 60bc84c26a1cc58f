#!/usr/bin/env python3
"""tools/lib/gcwaf.py - the write-amplification matrix of tools/bench-gc: one run's workload
on a mounted zlfs, the matrix's summary (from the runs' JSON alone), the side-by-side
comparison of versions, and the plot of WAF over time with the GC phases shaded. Standard
library only (and fio for the reader, gnuplot for the plot).

  gcwaf.py run --mnt MNT --ctl ZLFS_CTL --workload W --fill PCT --json OUT.json
               --timeline OUT.csv [--file-size B] [--big-file-size B] [--overwrite-bytes B]
               [--reader-iops N] [--sample-s S] [--seed N] [--reader-json FILE]
               [--data FILE]
  gcwaf.py fifo U                        the FIFO reference at utilisation U (0..1)
  gcwaf.py summary RUN.json... --csv OUT.csv
  gcwaf.py plot TIMELINE.csv PNG --title T [--fifo WAF]
  gcwaf.py compare SUMMARY.csv           versions side by side and the targets

Workloads: uniform (whole-file overwrites of random files), skew80 and skew95 (80% / 95% of
the overwrites go to a random 20% / 5% of the files), rand4k (4 KiB random overwrites inside
large files). The fill writes files one after the other with O_DIRECT until PCT% of what
statfs reports is used; the overwrites then write overwrite-bytes. A fio reader does 4 KiB
random reads at QD1 (rate-limited, so it measures latency without taking the writers' CPU)
over the same files during the overwrites; zlfs-ctl stats is sampled every S seconds.
The files hold random bytes, or --data FILE's (tools/bench-compress: compressible files);
the fill is planned from statfs before it starts, so it is the same logical fill whether
or not the filesystem compresses.
"""
import argparse
import bisect
import csv
import json
import math
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

MiB, GiB = float(1 << 20), float(1 << 30)
PHASES = ["no-gc", "normal", "boosted", "foreground"]
WORKLOADS = {"uniform": None, "skew80": (0.80, 0.20), "skew95": (0.95, 0.05), "rand4k": None}


def fifo_reference(u):
    """WAF of FIFO cleaning under uniform overwrites at utilisation U: the victim's
    utilisation x solves (x - 1) / ln x = u, and WA = 1 / (1 - x)."""
    if u <= 0:
        return 1.0
    if u >= 1:
        return float("inf")
    lo, hi = 1e-12, 1 - 1e-12  # (x - 1) / ln x rises from 0 to 1 on (0, 1)
    for _ in range(200):
        x = (lo + hi) / 2
        if (x - 1) / math.log(x) < u:
            lo = x
        else:
            hi = x
    return 1.0 / (1.0 - (lo + hi) / 2)


def ctl_stats(ctl, mnt):
    out = subprocess.run([ctl, "stats", mnt], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def used_share(mnt):
    st = os.statvfs(mnt)
    total = st.f_blocks * st.f_frsize
    return (total - st.f_bavail * st.f_frsize) / total if total else 0.0, total, st.f_bavail * st.f_frsize


class Sampler(threading.Thread):
    """zlfs-ctl stats every PERIOD seconds, one timeline row each."""

    COLS = ["t_s", "stage", "user_bytes", "device_bytes", "gc_bytes_migrated", "gc_zones_reclaimed",
            "free_zones", "prefree_zones", "gc_phase"]

    def __init__(self, ctl, mnt, path, period):
        super().__init__(daemon=True)
        self.ctl, self.mnt, self.period = ctl, mnt, period
        self.f = open(path, "w", newline="")
        self.w = csv.writer(self.f, lineterminator="\n")
        self.w.writerow(self.COLS)
        self.stage = "fill"
        self.t0 = time.monotonic()
        self.stop = threading.Event()

    def sample(self):
        try:
            s = ctl_stats(self.ctl, self.mnt)
        except (subprocess.CalledProcessError, ValueError):
            return
        g = s["gc"]
        self.w.writerow(["%.2f" % (time.monotonic() - self.t0), self.stage, s["bytes_written_by_users"],
                         s["bytes_written_to_device"], g["bytes_migrated"], g["zones_reclaimed"],
                         s["zones"]["free"], s["zones"]["prefree"], g["phase"]])
        self.f.flush()

    def run(self):
        while not self.stop.wait(self.period):
            self.sample()

    def finish(self):
        self.stop.set()
        self.join()
        self.sample()
        self.f.close()


def aligned(size, seed, data=None):
    """SIZE bytes, page aligned for O_DIRECT: random (a MiB repeated), or DATA's first bytes
    (repeated if it is shorter) when a file is given: what every file of the run holds."""
    buf = mmap.mmap(-1, size)
    if data:
        with open(data, "rb") as f:
            src = f.read(size)
        if not src:
            sys.exit("--data %s is empty" % data)
        buf.write((src * (size // len(src) + 1))[:size])
    else:
        buf.write(random.Random(seed).randbytes(min(size, 1 << 20)) * max(1, size >> 20))
    return buf


def fill(mnt, names_sizes, buf):
    """Write each file whole, one after the other, with O_DIRECT writes of len(buf)."""
    t = time.monotonic()
    total = 0
    for name, size in names_sizes:
        fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        try:
            off = 0
            while off < size:
                n = min(len(buf), size - off)
                os.pwrite(fd, memoryview(buf)[:n], off)
                off += n
        finally:
            os.close(fd)
        total += size
    return total, time.monotonic() - t


def plan_files(mnt, pct, size):
    """Names and sizes that bring the used share of MNT to PCT% (the last file shorter, in
    whole MiB, so large files still hit the fill)."""
    share, total, _ = used_share(mnt)
    need = int(pct / 100.0 * total - share * total)
    out = []
    while need >= (1 << 20):
        n = min(size, need - need % (1 << 20))
        out.append(("w%05d" % len(out), n))
        need -= n
    return out


def start_reader(mnt, files, iops, path):
    """fio 4 KiB random reads at QD1 over FILES until stopped (SIGTERM makes it report)."""
    args = ["fio", "--name=reader", "--opendir=" + mnt,
            "--rw=randread", "--bs=4k", "--ioengine=psync", "--direct=1", "--rate_iops=%d" % iops,
            "--time_based", "--runtime=1000000", "--file_service_type=random", "--norandommap",
            "--randrepeat=0", "--output-format=json", "--output=" + path]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(path + ".err", "w"))
    time.sleep(1)
    if p.poll() is not None:
        sys.exit("the fio reader did not start: %s" % open(path + ".err").read()[:2000])
    return p, args


def stop_reader(p, path):
    p.send_signal(signal.SIGTERM)
    p.wait()
    text = open(path).read()
    j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
    pct = j["clat_ns"].get("percentile", {})
    return {"reads": j["total_ios"], "p50_us": pct.get("50.000000", 0) / 1e3,
            "p99_us": pct.get("99.000000", 0) / 1e3, "p999_us": pct.get("99.900000", 0) / 1e3}


def overwrite(mnt, workload, files, target, seed, wbuf, small):
    """Overwrite until TARGET bytes were written; returns bytes and seconds."""
    rnd = random.Random(seed)
    written, t = 0, time.monotonic()
    if workload == "rand4k":
        fds = [os.open(os.path.join(mnt, n), os.O_WRONLY | os.O_DIRECT) for n, _ in files]
        ends, acc = [], 0
        for _, size in files:
            acc += size // 4096
            ends.append(acc)
        try:
            while written < target:
                b = rnd.randrange(acc)
                i = bisect.bisect_right(ends, b)
                os.pwrite(fds[i], small, (b - (ends[i - 1] if i else 0)) * 4096)
                written += 4096
        finally:
            for fd in fds:
                os.close(fd)
        return written, time.monotonic() - t
    order = list(range(len(files)))
    rnd.shuffle(order)  # the hot set is spread over the fill, not its first zones
    skew = WORKLOADS[workload]
    nhot = max(1, int(round(len(files) * skew[1]))) if skew else 0
    while written < target:
        if skew and rnd.random() < skew[0]:
            i = order[rnd.randrange(nhot)]
        elif skew:
            i = order[nhot + rnd.randrange(len(files) - nhot)] if len(files) > nhot else order[0]
        else:
            i = rnd.randrange(len(files))
        name, size = files[i]
        fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_DIRECT)
        try:
            os.pwrite(fd, memoryview(wbuf)[:size], 0)
        finally:
            os.close(fd)
        written += size
    return written, time.monotonic() - t


def run(a):
    if a.workload not in WORKLOADS:
        sys.exit("unknown workload %s (%s)" % (a.workload, ", ".join(WORKLOADS)))
    size = a.big_file_size if a.workload == "rand4k" else a.file_size
    files = plan_files(a.mnt, a.fill, size)
    if len(files) < 2:
        sys.exit("fill %d%% leaves room for fewer than 2 files" % a.fill)
    wbuf = aligned(max(size, 4 << 20) if a.workload != "rand4k" else 4 << 20, a.seed, a.data)
    small = aligned(4096, a.seed + 1, a.data)
    s0 = ctl_stats(a.ctl, a.mnt)
    sam = Sampler(a.ctl, a.mnt, a.timeline, a.sample_s)
    sam.start()
    fill_bytes, fill_s = fill(a.mnt, files, wbuf if a.workload == "rand4k" else memoryview(wbuf)[:4 << 20])
    subprocess.run([a.ctl, "sync", a.mnt], check=True)
    share, total, avail = used_share(a.mnt)
    s1 = ctl_stats(a.ctl, a.mnt)
    sam.stage = "overwrite"
    sam.sample()
    rd, rargs = start_reader(a.mnt, files, a.reader_iops, a.reader_json)
    try:
        ow_bytes, ow_s = overwrite(a.mnt, a.workload, files, a.overwrite_bytes, a.seed, wbuf, small)
    finally:
        reader = stop_reader(rd, a.reader_json)
        sam.finish()
    s2 = ctl_stats(a.ctl, a.mnt)
    dub = s2["bytes_written_by_users"] - s1["bytes_written_by_users"]
    ddb = s2["bytes_written_to_device"] - s1["bytes_written_to_device"]
    g1, g2 = s1["gc"], s2["gc"]
    out = {
        "workload": a.workload, "fill_pct": a.fill, "used_share": share, "df_bytes": total,
        "files": len(files), "file_bytes": size, "fill_bytes": fill_bytes, "fill_s": fill_s,
        "fill_MiBps": fill_bytes / MiB / fill_s if fill_s else 0.0,
        "overwrite_bytes": ow_bytes, "overwrite_s": ow_s,
        "overwrite_MiBps": ow_bytes / MiB / ow_s if ow_s else 0.0,
        "waf": ddb / dub if dub else 0.0, "user_bytes": dub, "device_bytes": ddb,
        "fifo": fifo_reference(share),
        "gc_bytes_migrated": g2["bytes_migrated"] - g1["bytes_migrated"],
        "gc_zones_reclaimed": g2["zones_reclaimed"] - g1["zones_reclaimed"],
        "gc_energy_j_per_reclaimed_gib": g2["energy_j_per_reclaimed_gib"],
        "gc_busy_ms": g2["busy_ms"] - g1["busy_ms"],
        "read": reader, "reader_iops_limit": a.reader_iops, "reader_command": " ".join(rargs),
        "fill_gc_bytes_migrated": g1["bytes_migrated"] - s0["gc"]["bytes_migrated"],
        "zones_main": s2["zones"]["main"], "reserve_zones": s2.get("free_zone_reserve"),
    }
    if "bytes_moved_to" in g2:  # builds before the frozen log do not report where moves went
        for log in GC_LOGS:
            out["gc_bytes_to_" + log] = g2["bytes_moved_to"][log] - g1["bytes_moved_to"][log]
    out["ratio_fifo"] = out["waf"] / out["fifo"]
    out["ratio_rate"] = out["overwrite_MiBps"] / out["fill_MiBps"] if out["fill_MiBps"] else 0.0
    out.update(timeline_figures(a.timeline))
    json.dump(out, open(a.json, "w"), indent=1)
    print("%s fill %d%% (df %.1f%%): WAF %.3f, FIFO %.3f, ratio %.3f; rate %.1f / fill %.1f MiB/s = %.2f; "
          "read p99 %.0f us; migrated %.0f MiB, %d zones" %
          (a.workload, a.fill, share * 100, out["waf"], out["fifo"], out["ratio_fifo"], out["overwrite_MiBps"],
           out["fill_MiBps"], out["ratio_rate"], reader["p99_us"], out["gc_bytes_migrated"] / MiB,
           out["gc_zones_reclaimed"]))


def load_timeline(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def timeline_figures(path):
    """From the overwrite samples: the WAF of the last third of the overwrites (steady
    state), the mean and minimum of free zones, and the share of samples in each phase."""
    rows = [r for r in load_timeline(path) if r["stage"] == "overwrite"]
    out = {"waf_last_third": 0.0, "free_zones_mean": 0.0, "free_zones_min": 0}
    if len(rows) < 2:
        return out
    u = [int(r["user_bytes"]) for r in rows]
    d = [int(r["device_bytes"]) for r in rows]
    k = next((i for i, x in enumerate(u) if x - u[0] >= (u[-1] - u[0]) * 2 / 3), len(u) - 1)
    if u[-1] > u[k]:
        out["waf_last_third"] = (d[-1] - d[k]) / (u[-1] - u[k])
    fz = [int(r["free_zones"]) for r in rows]
    out["free_zones_mean"] = sum(fz) / len(fz)
    out["free_zones_min"] = min(fz)
    for p in PHASES:
        out["phase_share_" + p] = sum(1 for r in rows if r["gc_phase"] == p) / len(rows)
    return out


GC_LOGS = ("cold", "frozen", "hot")  # the data logs GC moves to (zlfs-ctl stats: gc.bytes_moved_to)
SUMMARY_COLS = ["version", "geometry", "workload", "fill_pct", "used_pct", "waf", "waf_last_third", "fifo",
                "ratio_fifo", "fill_MiBps", "overwrite_MiBps", "ratio_rate", "read_p99_us", "read_p50_us",
                "reads", "gc_MiB_migrated", "gc_zones_reclaimed", "gc_energy_j_per_reclaimed_gib",
                "free_zones_mean", "free_zones_min", "share_boosted", "share_foreground", "overwrite_s"
                ] + ["gc_MiB_to_" + log for log in GC_LOGS]


def summary_row(j):
    return [j.get("version", ""), j.get("geometry", ""), j["workload"], j["fill_pct"],
            "%.1f" % (j["used_share"] * 100), "%.3f" % j["waf"], "%.3f" % j["waf_last_third"],
            "%.3f" % j["fifo"], "%.3f" % j["ratio_fifo"], "%.1f" % j["fill_MiBps"],
            "%.1f" % j["overwrite_MiBps"], "%.3f" % j["ratio_rate"], "%.0f" % j["read"]["p99_us"],
            "%.0f" % j["read"]["p50_us"], j["read"]["reads"], "%.0f" % (j["gc_bytes_migrated"] / MiB),
            j["gc_zones_reclaimed"], "%.1f" % j["gc_energy_j_per_reclaimed_gib"],
            "%.1f" % j["free_zones_mean"], j["free_zones_min"],
            "%.2f" % j.get("phase_share_boosted", 0), "%.2f" % j.get("phase_share_foreground", 0),
            "%.0f" % j["overwrite_s"]] + [
            "%.0f" % (j["gc_bytes_to_" + log] / MiB) if "gc_bytes_to_" + log in j else ""
            for log in GC_LOGS]


def summary(a):
    runs = [json.load(open(p)) for p in a.runs]
    order = list(WORKLOADS)
    runs.sort(key=lambda j: (j.get("geometry", ""), order.index(j["workload"]), j["fill_pct"], j.get("version", "")))
    rows = [summary_row(j) for j in runs]
    with open(a.csv, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(SUMMARY_COLS)
        w.writerows(rows)
    print_table(rows)


def print_table(rows):
    head = ["version", "geometry", "workload", "fill", "WAF", "last 1/3", "FIFO", "ratio", "fill MiB/s",
            "ow MiB/s", "rate", "rd p99 us", "migr MiB", "zones", "J/GiB", "free avg"]
    idx = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 18]
    table = [head] + [[str(r[i]) for i in idx] for r in rows]
    wid = [max(len(t[c]) for t in table) for c in range(len(head))]
    for t in table:
        print("  ".join(x.rjust(wid[c]) for c, x in enumerate(t)))


def compare(a):
    rows = list(csv.DictReader(open(a.csv, newline="")))
    versions = []
    for r in rows:
        if r["version"] not in versions:
            versions.append(r["version"])
    cells = {}
    for r in rows:
        cells.setdefault((r["geometry"], r["workload"], r["fill_pct"]), {})[r["version"]] = r
    print("WAF (FIFO ratio) and user write rate / fill rate, by version: " + ", ".join(versions))
    for key in sorted(cells, key=lambda k: (k[0], list(WORKLOADS).index(k[1]) if k[1] in WORKLOADS else 9, int(k[2]))):
        c = cells[key]
        print("  %-10s %-8s %3s%%  " % key + "  ".join(
            "%s: %s (%s) %s" % (v, c[v]["waf"], c[v]["ratio_fifo"], c[v]["ratio_rate"]) if v in c else v + ": -"
            for v in versions))
    print("Targets:")
    for v in versions:
        for (geo, wl, fill), c in sorted(cells.items()):
            if v not in c:
                continue
            r = c[v]
            if wl == "uniform":
                ok = float(r["ratio_fifo"]) <= 1.1
                print("  %s %s uniform %s%%: WAF/FIFO %s <= 1.1: %s" % (v, geo, fill, r["ratio_fifo"], "met" if ok else "NOT met"))
                if fill == "75":
                    ok = float(r["ratio_rate"]) >= 0.6
                    print("  %s %s uniform 75%%: write rate / fill rate %s >= 0.6: %s" % (v, geo, r["ratio_rate"], "met" if ok else "NOT met"))
            if wl == "skew80" and v in cells.get((geo, "uniform", fill), {}):
                u = float(cells[(geo, "uniform", fill)][v]["waf"])
                q = float(r["waf"]) / u if u else 0
                print("  %s %s skew80 %s%%: WAF / uniform WAF %.3f <= 0.8: %s" % (v, geo, fill, q, "met" if q <= 0.8 else "NOT met"))


def plot(a):
    rows = load_timeline(a.timeline)
    ow = [r for r in rows if r["stage"] == "overwrite"]
    if len(ow) < 3:
        sys.exit("plot: fewer than 3 overwrite samples in %s" % a.timeline)
    t0 = float(ow[0]["t_s"])
    u0, d0 = int(ow[0]["user_bytes"]), int(ow[0]["device_bytes"])
    tmp = a.png + ".dat"
    bands, w = [], max(1, a.window)
    with open(tmp, "w") as f:
        for i, r in enumerate(ow):
            t = float(r["t_s"]) - t0
            u, d = int(r["user_bytes"]), int(r["device_bytes"])
            j = max(0, i - w)
            du = u - int(ow[j]["user_bytes"])
            win = (d - int(ow[j]["device_bytes"])) / du if du > 0 else float("nan")
            cum = (d - d0) / (u - u0) if u > u0 else float("nan")
            f.write("%.2f %.4f %.4f %s\n" % (t, win, cum, r["free_zones"]))
            ph = r["gc_phase"]
            if bands and bands[-1][2] == ph:
                bands[-1][1] = t
            else:
                if bands:
                    bands[-1][1] = t
                bands.append([t, t, ph])
    colors = {"no-gc": "#e0f0e0", "normal": "#fff0c0", "boosted": "#ffd8a0", "foreground": "#ffb0b0"}
    objs = ["set object %d rect from %g, graph 0 to %g, graph 1 behind fc rgb '%s' fs solid 0.8 noborder"
            % (i + 1, x0, x1, colors.get(ph, "#dddddd")) for i, (x0, x1, ph) in enumerate(bands) if x1 > x0]
    fifo = ("%g title 'FIFO reference %.2f' with lines lw 2 dt 2 lc rgb 'black', " % (a.fifo, a.fifo)) if a.fifo else ""
    script = """set terminal pngcairo size 1000,500 font ',10'
set output '%s'
set title "%s\\nshaded: GC phase (green no-gc, yellow normal, orange boosted, red foreground)"
set grid
set key outside right
set rmargin at screen 0.78
set xlabel 'seconds of overwrites'
set ylabel 'write amplification'
set y2label 'free zones'
set y2tics
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
%s
plot %s'%s' using 1:2 with lines lw 1 lc rgb '#3060c0' title 'WAF, last %d samples', \\
     '%s' using 1:3 with lines lw 2 lc rgb '#c03030' title 'WAF, all overwrites so far', \\
     '%s' using 1:4 axes x1y2 with lines lw 1 lc rgb '#40a040' title 'free zones'
""" % (a.png, a.title, "\n".join(objs), fifo, tmp, w, tmp, tmp)
    if not shutil.which("gnuplot"):
        sys.exit("gnuplot is not installed (apt-get install gnuplot-nox)")
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.unlink(tmp)


def on_term(signum, frame):
    raise SystemExit(128 + signum)  # so the reader is stopped and the timeline closed


def main():
    signal.signal(signal.SIGTERM, on_term)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--mnt", required=True)
    r.add_argument("--ctl", required=True)
    r.add_argument("--workload", required=True)
    r.add_argument("--fill", type=int, required=True)
    r.add_argument("--json", required=True)
    r.add_argument("--timeline", required=True)
    r.add_argument("--reader-json", required=True)
    r.add_argument("--file-size", type=int, default=4 << 20)
    r.add_argument("--big-file-size", type=int, default=128 << 20)
    r.add_argument("--overwrite-bytes", type=int, required=True)
    r.add_argument("--reader-iops", type=int, default=200)
    r.add_argument("--sample-s", type=float, default=1.0)
    r.add_argument("--seed", type=int, default=12)
    r.add_argument("--data", help="the files' contents from this file (default: random bytes)")
    f = sub.add_parser("fifo")
    f.add_argument("u", type=float)
    s = sub.add_parser("summary")
    s.add_argument("runs", nargs="+")
    s.add_argument("--csv", required=True)
    c = sub.add_parser("compare")
    c.add_argument("csv")
    p = sub.add_parser("plot")
    p.add_argument("timeline")
    p.add_argument("png")
    p.add_argument("--title", default="WAF over time")
    p.add_argument("--fifo", type=float, default=0.0)
    p.add_argument("--window", type=int, default=5)
    a = ap.parse_args()
    if a.cmd == "run":
        run(a)
    elif a.cmd == "fifo":
        print("%.4f" % fifo_reference(a.u))
    elif a.cmd == "summary":
        summary(a)
    elif a.cmd == "compare":
        compare(a)
    else:
        plot(a)


if __name__ == "__main__":
    main()
