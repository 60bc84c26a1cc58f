#!/usr/bin/env python3
"""tools/lib/workloads.py - the Python side of tools/age, tools/install-verify and
tools/bench-randrange: the workloads themselves, the summaries (computed from the CSV alone,
so a test can feed a known CSV) and the gnuplot plots. Standard library only.

  workloads.py age-run DIR --fs NAME --csv FILE [--ctl ZLFS_CTL --mnt MNT] [sizes...]
  workloads.py age-summary CSV [--first K]
  workloads.py age-plot CSV PNG
  workloads.py iv-install DIR --size BYTES --manifest FILE [--packs N]
  workloads.py iv-verify DIR --manifest FILE           (prints JSON: time, bytes, errors)
  workloads.py iv-summary CSV
  workloads.py iv-plot CSV PNG
  workloads.py fio-rows FIO_JSON FS RANGE JOB          (one CSV line of bench-randrange)
  workloads.py rr-summary CSV
  workloads.py rr-plot CSV PNG
  workloads.py dev-snap FILE [--ctl ZLFS_CTL --mnt MNT | --dev-control PATH] [--sync]
                                                       (the device model's counters now)
Device-time figures (the emulator's simulated NAND, --guest conv-model) come from devmodel.py:
a run given --dev-control, or zlfs on an image with a timing model, fills the dev_* columns.
"""
import argparse
import csv
import errno
import hashlib
import json
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import devmodel

MiB, GiB = float(1 << 20), float(1 << 30)
BUCKETS = ["lt_4k", "4k_8k", "8k_16k", "16k_32k", "32k_64k", "64k_128k", "128k_256k",
           "256k_512k", "ge_512k"]
BUCKET_LABELS = ["<4K", "4-8K", "8-16K", "16-32K", "32-64K", "64-128K", "128-256K",
                 "256-512K", ">=512K"]
PHASES = ["no-gc", "normal", "boosted", "foreground"]


# ---- helpers ----------------------------------------------------------------------------------
class Progress:
    """One updating terminal line on stderr; silent when stderr is not a terminal."""

    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.width = 0

    def show(self, text):
        if not self.tty:
            return
        text = text[:max(20, shutil.get_terminal_size((100, 20)).columns - 1)]
        sys.stderr.write("\r" + text + " " * max(0, self.width - len(text)))
        sys.stderr.flush()
        self.width = len(text)

    def done(self):
        if self.tty and self.width:
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.width = 0


def ctl_stats(ctl, mnt):
    if not ctl:
        return None
    out = subprocess.run([ctl, "stats", mnt], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def open_direct(path, flags):
    """O_DIRECT if the filesystem takes it, else buffered (the caller is told which)."""
    try:
        return os.open(path, flags | os.O_DIRECT, 0o644), True
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        return os.open(path, flags, 0o644), False


def pattern(seed, size=1 << 20):
    return random.Random(seed).randbytes(size)


def write_file(path, size, block, pat, tag, direct=True, fsync=True):
    """Write SIZE bytes (PAT, with TAG and the offset stamped in each block so no two blocks
    of the tree are equal); returns whether O_DIRECT was used."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if direct:
        fd, direct = open_direct(path, flags)
    else:
        fd = os.open(path, flags, 0o644)
    buf = mmap.mmap(-1, block)  # page aligned, for O_DIRECT
    try:
        off = 0
        while off < size:
            n = min(block, size - off)
            buf.seek(0)
            buf.write(pat[:block])
            buf.seek(0)
            buf.write(b"%s@%d;" % (tag, off))
            if n < block:
                if direct:
                    raise ValueError("%s: size %d is not a multiple of %d" % (path, size, block))
                os.write(fd, buf[:n])
            else:
                os.write(fd, buf)
            off += n
        if fsync:
            os.fsync(fd)
    finally:
        buf.close()
        os.close(fd)
    return direct


def read_file_direct(path, block):
    fd, direct = open_direct(path, os.O_RDONLY)
    if not direct:
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
    buf = mmap.mmap(-1, block)
    total = 0
    try:
        while True:
            n = os.readv(fd, [buf])
            if n <= 0:
                break
            total += n
    finally:
        buf.close()
        os.close(fd)
    return total, direct


def pairs(names):
    """(a, b) pairs compared in the summaries: zlfs against every other filesystem, and the
    study's contrast, F2FS on the zoned disk against F2FS on the conventional one."""
    out = [("zlfs", b) for b in names if b != "zlfs" and "zlfs" in names]
    if "f2fs" in names and "f2fs-conv" in names:
        out.append(("f2fs", "f2fs-conv"))
    return out


def fsize(b):
    """16M, 1G, 1.5G: a range for people"""
    b = int(b)
    if b >= 1 << 30:
        return "%gG" % round(b / GiB, 2)
    return "%gM" % round(b / MiB, 1)


def fnum(v, nd=1):
    if v is None or v == "":
        return "-"
    return "%.*f" % (nd, v)


def load_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_checked(path, columns, prog):
    """The rows of a tool's CSV; exits saying what is wrong if it has none or lacks columns."""
    rows = load_csv(path)
    if not rows:
        sys.exit("%s: %s has no rows" % (prog, path))
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        sys.exit("%s: %s lacks columns %s" % (prog, path, ", ".join(missing)))
    return rows


def num(row, key):
    v = row.get(key, "")
    return float(v) if v not in ("", None) else None


def gnuplot(script, png):
    if not shutil.which("gnuplot"):
        sys.exit("gnuplot is not installed (apt-get install gnuplot-nox, or tools/install-deps --tests)")
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    if not os.path.exists(png) or os.path.getsize(png) == 0:
        sys.exit("gnuplot wrote no %s" % png)


def write_rows(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


# ---- tools/age --------------------------------------------------------------------------------
AGE_BASE_COLUMNS = ["fs", "iter", "elapsed_s", "files", "file_bytes", "fill_s", "test_bytes",
                    "write_MiBps", "read_MiBps", "free_bytes", "free_pct", "gc_phase",
                    "gc_phases_seen", "waf", "free_zones", "gc_bytes_migrated", "direct"]
# device time on the emulator's NAND model (empty without one): the test file's write and
# read in simulated time, the device's WAF since the run began, this iteration's device GC
# pages moved and erases, the map misses of the read
AGE_DEV_COLUMNS = ["dev_write_MiBps", "dev_read_MiBps", "dev_waf", "dev_gc_pages", "dev_erases",
                   "dev_map_miss_pct"]
AGE_COLUMNS = AGE_BASE_COLUMNS + AGE_DEV_COLUMNS


def age_run(a):
    d = a.dir
    os.makedirs(d, exist_ok=True)
    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    out = open(a.csv, "a", newline="")
    w = csv.writer(out, lineterminator="\n")
    if new:
        w.writerow(AGE_COLUMNS)
        out.flush()
    prog = Progress()
    pat = pattern(1)
    small = pat[:a.file_size] if a.file_size <= len(pat) else (pat * (a.file_size // len(pat) + 1))[:a.file_size]
    t0 = time.monotonic()
    last_t = 0
    s = ctl_stats(a.ctl, a.mnt)
    if s:
        last_t = max([t["time_ns"] for t in s["gc"]["transitions"]] + [0])
    dev = devmodel.Source.from_args(a)
    dev_first = dev.snap(sync=True)
    it, reason = 0, "max iterations"
    last = {"w": 0.0, "phase": s["gc"]["phase"] if s else "-"}
    try:
        while a.max_iters <= 0 or it < a.max_iters:
            free, total = free_bytes(d)
            if free < a.min_free:
                reason = "free space %.1f MiB below the threshold %.1f MiB" % (free / MiB, a.min_free / MiB)
                break
            need = a.files * a.file_size + a.test_size
            if free < need:
                reason = "free space %.1f MiB less than one iteration needs (%.1f MiB)" % (free / MiB, need / MiB)
                break
            if a.max_seconds and time.monotonic() - t0 > a.max_seconds:
                reason = "time limit"
                break
            it += 1

            def show(what):
                prog.show("%s: iter %d  %s  free %.0f MiB (%.1f%%)  phase %s  last write %.1f MiB/s" % (
                    a.fs, it, what, free / MiB, 100.0 * free / total, last["phase"], last["w"]))

            show("creating %d files" % a.files)
            sub = os.path.join(d, "it%05d" % it)
            os.mkdir(sub)
            t = time.monotonic()
            for i in range(a.files):
                fd = os.open(os.path.join(sub, "f%06d" % i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, small)
                finally:
                    os.close(fd)
            fill_s = time.monotonic() - t
            show("deleting every second file")
            for i in range(1, a.files, 2):
                os.unlink(os.path.join(sub, "f%06d" % i))
            show("writing the test file")
            test = os.path.join(d, "test.dat")
            d0 = dev.snap(sync=True)
            t = time.monotonic()
            direct = write_file(test, a.test_size, a.block, pat, b"age%d" % it)
            ws = time.monotonic() - t
            d1 = dev.snap()
            last["w"] = a.test_size / MiB / ws
            show("reading the test file")
            t = time.monotonic()
            got, rdirect = read_file_direct(test, a.block)
            rs = time.monotonic() - t
            d2 = dev.snap()
            if got != a.test_size:
                sys.exit("age: read back %d of %d bytes of %s" % (got, a.test_size, test))
            os.unlink(test)
            free, total = free_bytes(d)
            s = ctl_stats(a.ctl, a.mnt)
            phase = seen = waf = fz = mig = ""
            if s:
                g = s["gc"]
                phase = g["phase"]
                ts = [t2 for t2 in g["transitions"] if t2["time_ns"] > last_t]
                seen = "|".join(dict.fromkeys([t2["to"] for t2 in ts] + [phase]))
                last_t = max([t2["time_ns"] for t2 in g["transitions"]] + [last_t])
                waf, fz, mig = "%.3f" % s["write_amplification"], s["zones"]["free"], g["bytes_migrated"]
                last["phase"] = phase
            w.writerow([a.fs, it, "%.1f" % (time.monotonic() - t0), a.files, a.file_size,
                        "%.3f" % fill_s, a.test_size, "%.2f" % (a.test_size / MiB / ws),
                        "%.2f" % (a.test_size / MiB / rs), free, "%.2f" % (100.0 * free / total),
                        phase, seen, waf, fz, mig, int(direct and rdirect)] +
                       age_dev_cells(d0, d1, d2, dev_first, a.test_size))
            out.flush()
            show("done")
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        reason = "ENOSPC in iteration %d (that iteration is not in the CSV)" % it
    except KeyboardInterrupt:
        prog.done()
        out.close()
        print("age: %s: interrupted at iteration %d; the CSV keeps the finished ones" % (a.fs, it), file=sys.stderr)
        sys.exit(130)
    prog.done()
    out.close()
    print("age: %s: %d iterations, stopped: %s" % (a.fs, it, reason), file=sys.stderr)


def age_dev_cells(d0, d1, d2, first, test_bytes):
    """The dev_* cells of one iteration: write = d0..d1, read = d1..d2 (empty without a model)."""
    if not d2:
        return [""] * len(AGE_DEV_COLUMNS)
    w, r, it, run = (devmodel.delta(d0, d1), devmodel.delta(d1, d2), devmodel.delta(d0, d2),
                     devmodel.delta(first, d2))
    return [devmodel.cell(devmodel.mibps(test_bytes, w)), devmodel.cell(devmodel.mibps(test_bytes, r)),
            devmodel.cell(devmodel.waf(run, d2["prog_unit"]), 3), it["gc_pages"], it["erases"],
            devmodel.cell(devmodel.miss_pct(r))]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def med_floor(v, w):
    """The lowest median of W consecutive values: a floor that one noisy iteration does not make."""
    w = min(w, len(v))
    return min(median(v[i:i + w]) for i in range(len(v) - w + 1))


def age_stats(rows, first, window=5, wcol="write_MiBps", rcol="read_MiBps"):
    """The summary of one filesystem's rows (in iteration order), from its WCOL and RCOL."""
    wr = [num(r, wcol) for r in rows]
    rd = [num(r, rcol) for r in rows]
    k = min(first, len(rows))
    r0 = sum(rd[:k]) / k
    w0 = sum(wr[:k]) / k
    s = {"iterations": len(rows), "first_k": k,
         "write_first_MiBps": w0, "write_floor_MiBps": min(wr),
         "write_floor_iter": int(rows[wr.index(min(wr))]["iter"]),
         "write_floor_med_MiBps": med_floor(wr, window), "read_floor_med_MiBps": med_floor(rd, window),
         "read_first_MiBps": r0, "read_min_MiBps": min(rd),
         "read_min_iter": int(rows[rd.index(min(rd))]["iter"]),
         "read_last_MiBps": sum(rd[-k:]) / k,
         "read_drop_pct": 100.0 * (1 - min(rd) / r0) if r0 else 0.0,
         "read_drop_last_pct": 100.0 * (1 - sum(rd[-k:]) / k / r0) if r0 else 0.0,
         "free_last_bytes": num(rows[-1], "free_bytes"),
         "waf_last": num(rows[-1], "waf"), "phase_began": {}}
    for r in rows:
        for p in [r.get("gc_phase", "")] + (r.get("gc_phases_seen") or "").split("|"):
            if p and p not in s["phase_began"]:
                s["phase_began"][p] = int(r["iter"])
    return s


def age_summary(a):
    rows = load_checked(a.csv, AGE_BASE_COLUMNS, "age")
    by = {}
    for r in rows:
        by.setdefault(r["fs"], []).append(r)
    for fs in by:
        by[fs].sort(key=lambda r: int(r["iter"]))
    st = {fs: age_stats(rs, a.first, a.window) for fs, rs in by.items()}
    out = []  # fs, metric, value, unit
    for fs, s in st.items():
        out += [(fs, "iterations", s["iterations"], ""),
                (fs, "write_first_MiBps", s["write_first_MiBps"], "MiB/s"),
                (fs, "write_floor_MiBps", s["write_floor_MiBps"], "MiB/s"),
                (fs, "write_floor_iter", s["write_floor_iter"], "iter"),
                (fs, "write_floor_med%d_MiBps" % a.window, s["write_floor_med_MiBps"], "MiB/s"),
                (fs, "read_floor_med%d_MiBps" % a.window, s["read_floor_med_MiBps"], "MiB/s"),
                (fs, "read_first_MiBps", s["read_first_MiBps"], "MiB/s"),
                (fs, "read_min_MiBps", s["read_min_MiBps"], "MiB/s"),
                (fs, "read_drop_pct", s["read_drop_pct"], "%"),
                (fs, "read_drop_last_pct", s["read_drop_last_pct"], "%")]
        if s["waf_last"] is not None:
            out.append((fs, "waf_last", s["waf_last"], "x"))
        for p in PHASES:
            if p in s["phase_began"]:
                out.append((fs, "phase_%s_began_iter" % p.replace("-", "_"), s["phase_began"][p], "iter"))
    print("Aging: %s; first iterations = the first %d" % (a.csv, a.first))
    print("  %-16s %6s %10s %10s %6s %9s %10s %10s %9s %8s %8s  %s" % (
        "fs", "iters", "write0", "wfloor", "@iter", "wfloor~%d" % a.window, "read0", "read min",
        "rfloor~%d" % a.window, "drop%", "drop%end", "phases began (iter)"))
    for fs, s in st.items():
        ph = ", ".join("%s %d" % (p, s["phase_began"][p]) for p in PHASES if p in s["phase_began"])
        print("  %-16s %6d %10.1f %10.1f %6d %9.1f %10.1f %10.1f %9.1f %8.1f %8.1f  %s" % (
            fs, s["iterations"], s["write_first_MiBps"], s["write_floor_MiBps"], s["write_floor_iter"],
            s["write_floor_med_MiBps"], s["read_first_MiBps"], s["read_min_MiBps"],
            s["read_floor_med_MiBps"], s["read_drop_pct"], s["read_drop_last_pct"], ph or "-"))
    for x, b in pairs(list(st)):
        z, o = st[x], st[b]
        for m, label in (("write_floor_MiBps", "write floor"),
                         ("write_floor_med_MiBps", "write floor, median of %d" % a.window),
                         ("read_first_MiBps", "read, first iterations"), ("read_min_MiBps", "read minimum")):
            if o[m] > 0:
                out.append(("%s/%s" % (x, b), "ratio_" + m, z[m] / o[m], "x"))
                print("  ratio %s/%s %-24s %.3f" % (x, b, label, z[m] / o[m]))
    print("  (MiB/s; write0/read0: mean of the first iterations; wfloor~%d, rfloor~%d: the lowest median"
          " of %d consecutive iterations; drop%%: 1 - read min / read0; drop%%end: 1 - mean of the last %d"
          " / read0)" % (a.window, a.window, a.window, a.first))
    devmodel.age_summary(by, a.first, a.window, age_stats, out)
    if a.out:
        write_rows(a.out, ["fs", "metric", "value", "unit"],
                   [(f, m, ("%.3f" % v) if isinstance(v, float) else v, u) for f, m, v, u in out])


def age_plot(a):
    rows = load_csv(a.csv)
    by = {}
    for r in rows:
        by.setdefault(r["fs"], []).append(r)
    tmp = a.png + ".d"
    os.makedirs(tmp, exist_ok=True)
    plots_w, plots_r, bands = [], [], []
    colors = {"no-gc": "#e0f0e0", "normal": "#fff0c0", "boosted": "#ffd8a0", "foreground": "#ffb0b0"}
    # a run on the device model: the figures in device time (the wall clock of an emulated
    # guest says little)
    dev = devmodel.has_dev(rows, "dev_write_MiBps")
    wcol, rcol = ("dev_write_MiBps", "dev_read_MiBps") if dev else ("write_MiBps", "read_MiBps")
    for fs, rs in by.items():
        rs.sort(key=lambda r: int(r["iter"]))
        p = os.path.join(tmp, fs.replace("/", "_") + ".dat")
        with open(p, "w") as f:
            for r in rs:
                f.write("%s %s %s\n" % (r["iter"], r[wcol], r[rcol]))
        plots_w.append("'%s' using 1:2 with linespoints pt 7 ps 0.4 title '%s write'" % (p, fs))
        plots_r.append("'%s' using 1:3 with linespoints pt 7 ps 0.4 title '%s read'" % (p, fs))
        if fs == "zlfs" or (not bands and "zlfs" not in by and any(r["gc_phase"] for r in rs)):
            # shaded bands: the GC phase at the end of each iteration, merged into runs
            runs = []
            for r in rs:
                ph, i = r["gc_phase"], int(r["iter"])
                if runs and runs[-1][2] == ph and runs[-1][1] == i - 1:
                    runs[-1][1] = i
                else:
                    runs.append([i, i, ph])
            bands = [(x0 - 0.5, x1 + 0.5, ph) for x0, x1, ph in runs if ph]
    objs = []
    for i, (x0, x1, ph) in enumerate(bands):
        objs.append("set object %d rect from %g, graph 0 to %g, graph 1 behind fc rgb '%s' fs solid 0.8 noborder"
                    % (i + 1, x0, x1, colors.get(ph, "#dddddd")))
    legend = "  ".join("%s" % p for p in PHASES if any(b[2] == p for b in bands))
    script = """set terminal pngcairo size 1000,700 font ',10'
set output '%s'
set multiplot layout 2,1 title "Aging: test-file throughput per iteration%s%s"
set grid
set key outside right
set lmargin at screen 0.08
set rmargin at screen 0.78
set xlabel 'iteration'
set xrange [0.5:%d.5]
set ylabel 'write MiB/s'
set yrange [0:*]
%s
plot %s
set ylabel 'read MiB/s'
plot %s
unset multiplot
""" % (a.png, " (simulated device time)" if dev else "", ("\\nshaded: zlfs GC phase (green no-gc, yellow normal, orange boosted, red foreground): " + legend) if bands else "",
       max(int(r["iter"]) for r in rows), "\n".join(objs), ", ".join(plots_w), ", ".join(plots_r))
    gnuplot(script, a.png)
    shutil.rmtree(tmp, ignore_errors=True)


# ---- tools/install-verify ---------------------------------------------------------------------
def iv_tree(total, packs, seed):
    """The asset tree: PACKS big packs with 70% of the bytes, the rest in small files of 4 KiB
    to 1 MiB (log-uniform, 4 KiB multiples) in a few directory levels."""
    rnd = random.Random(seed)
    files = []
    pack_total = int(total * 0.7) // packs // 4096 * 4096
    for i in range(packs):
        files.append(("packs/pack%02d.pak" % i, pack_total))
    rest = total - pack_total * packs
    i = 0
    while rest > 4096:
        size = min(rest, int(2 ** rnd.uniform(12, 20)) // 4096 * 4096 or 4096)
        files.append(("assets/d%02d/s%02d/a%06d.bin" % (i % 37, (i // 37) % 11, i), size))
        rest -= size
        i += 1
    return files


def iv_install(a):
    files = iv_tree(a.size, a.packs, a.seed)
    pat = pattern(a.seed)
    man = []
    t0 = time.monotonic()
    prog = Progress()
    done = 0
    for n, (rel, size) in enumerate(files):
        p = os.path.join(a.dir, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        h = hashlib.sha256()
        # buffered 256 KiB writes, as an installer extracting an archive would
        with open(p, "wb") as f:
            off = 0
            while off < size:
                blk = min(262144, size - off)
                chunk = (b"%s@%d;" % (rel.encode(), off)) + pat[:blk]
                chunk = chunk[:blk]
                f.write(chunk)
                h.update(chunk)
                off += blk
                done += blk
                if off % (64 << 20) == 0 or n % 200 == 0:
                    prog.show("install: %d/%d files, %.0f of %.0f MiB" % (n + 1, len(files), done / MiB, a.size / MiB))
        man.append((rel, size, h.hexdigest()))
    os.sync()
    took = time.monotonic() - t0
    prog.done()
    with open(a.manifest, "w") as f:
        for rel, size, hx in man:
            f.write("%s %d %s\n" % (hx, size, rel))
    print(json.dumps({"files": len(files), "bytes": sum(s for _, s in files), "install_s": round(took, 3)}))


def iv_verify(a):
    man = [l.split(" ", 2) for l in open(a.manifest).read().splitlines()]
    prog = Progress()
    t0 = time.monotonic()
    bad, done = 0, 0
    total = sum(int(s) for _, s, _ in man)
    for n, (hx, size, rel) in enumerate(man):
        h = hashlib.sha256()
        with open(os.path.join(a.dir, rel), "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                h.update(b)
                done += len(b)
        if h.hexdigest() != hx:
            bad += 1
            print("install-verify: hash mismatch: %s" % rel, file=sys.stderr)
        if n % 200 == 0:
            prog.show("verify: %d/%d files, %.0f of %.0f MiB" % (n + 1, len(man), done / MiB, total / MiB))
    took = time.monotonic() - t0
    prog.done()
    print(json.dumps({"files": len(man), "bytes": done, "verify_s": round(took, 3), "mismatches": bad}))


IV_BASE_COLUMNS = ["fs", "aged_iters", "used_pct", "files", "bytes", "install_s", "install_MiBps",
                   "verify_s", "verify_MiBps", "mismatches", "dev_reads", "dev_read_bytes",
                   "mean_read_KiB"] + ["reads_" + b for b in BUCKETS] + ["gc_migrated_bytes"]
# on the emulator's NAND model: install and verify in simulated time (the read counts and
# sizes above then come from the model's counters too, for every filesystem alike), and the
# verification's reads one at a time (the sum of their unloaded service times: a reader at
# queue depth 1, as a game checking its files one after the other is)
IV_DEV_COLUMNS = ["dev_install_s", "dev_verify_s", "dev_verify_MiBps", "dev_verify_qd1_s"]
IV_COLUMNS = IV_BASE_COLUMNS + IV_DEV_COLUMNS


def iv_row(a):
    """One CSV row of install-verify from the run's files in OUT: install and verify JSON,
    zlfs-ctl stats before and after the verification, or the block device's counters
    (B0, B1: reads and sectors), and with a device model its snapshots around each phase."""
    p = lambda n: os.path.join(a.out, n % a.tag)  # noqa: E731
    ins, ver = json.load(open(p("install-%s.json"))), json.load(open(p("verify-%s.json")))
    counts, reads, rbytes, mean, gc = [""] * len(BUCKETS), "", "", "", ""
    if os.path.exists(p("stats-%s-before-verify.json")) and os.path.exists(p("stats-%s-after-verify.json")):
        j0, j1 = json.load(open(p("stats-%s-before-verify.json"))), json.load(open(p("stats-%s-after-verify.json")))
        s0, s1 = j0["device_read_sizes"], j1["device_read_sizes"]
        counts = [s1[b] - s0[b] for b in BUCKETS]
        reads = sum(counts)
        gc = j1["gc"]["bytes_migrated"] - j0["gc"]["bytes_migrated"]
    elif a.b0 and a.b1:
        (r0, sec0), (r1, sec1) = [map(int, x.split()) for x in (a.b0, a.b1)]
        reads, rbytes = r1 - r0, (sec1 - sec0) * 512
        mean = "%.1f" % (rbytes / reads / 1024) if reads else ""
    snaps = [devmodel.load(p("dev-%s-" + w + ".json")) for w in ("before-install", "after-install",
                                                                   "before-verify", "after-verify")]
    dev = [""] * len(IV_DEV_COLUMNS)
    v = devmodel.delta(snaps[2], snaps[3])
    if v:  # the device's own counters, alike for every filesystem
        counts = [v["reads_" + b] for b in BUCKETS]
        reads, rbytes = v["host_reads"], v["host_read_bytes"]
        mean = "%.1f" % (rbytes / reads / 1024) if reads else ""
        dev = [devmodel.cell(devmodel.sim_s(devmodel.delta(snaps[0], snaps[1])), 4),
               devmodel.cell(devmodel.sim_s(v), 4), devmodel.cell(devmodel.mibps(ver["bytes"], v)),
               devmodel.cell(v["read_service_ns"] / 1e9, 4)]
    print(",".join(str(x) for x in [
        a.label, a.aged, a.used, ins["files"], ins["bytes"], ins["install_s"],
        "%.1f" % (ins["bytes"] / MiB / ins["install_s"]), ver["verify_s"],
        "%.1f" % (ver["bytes"] / MiB / ver["verify_s"]), ver["mismatches"], reads, rbytes, mean] +
        counts + [gc] + dev))


def dev_snap(a):
    """The device model's counters now, to FILE (an empty file without a model)."""
    snap = devmodel.Source.from_args(a).snap(sync=a.sync)
    with open(a.file, "w") as f:
        if snap:
            json.dump(snap, f)


def iv_summary(a):
    rows = load_checked(a.csv, IV_BASE_COLUMNS, "install-verify")
    out = []
    print("Install and verify: %s" % a.csv)
    print("  %-16s %8s %10s %9s %10s %9s %10s %9s  %s" % (
        "fs", "GiB", "install s", "MiB/s", "verify s", "MiB/s", "dev reads", "mean KiB",
        "device reads by size, % of reads: " + " ".join(BUCKET_LABELS)))
    for r in rows:
        fs = r["fs"]
        n = [num(r, "reads_" + b) for b in BUCKETS]
        tot = sum(x for x in n if x is not None) if any(x is not None for x in n) else None
        pct = [100.0 * x / tot if tot else None for x in n] if tot else [None] * len(BUCKETS)
        print("  %-16s %8.2f %10.2f %9.1f %10.2f %9.1f %10s %9s  %s" % (
            fs, num(r, "bytes") / GiB, num(r, "install_s"), num(r, "install_MiBps"), num(r, "verify_s"),
            num(r, "verify_MiBps"), r["dev_reads"] or "-", fnum(num(r, "mean_read_KiB")),
            " ".join("%s %s" % (l, fnum(p)) for l, p in zip(BUCKET_LABELS, pct)) if tot else "(no per-size counts)"))
        out += [(fs, "verify_s", num(r, "verify_s"), "s"), (fs, "install_s", num(r, "install_s"), "s")]
        if tot:
            for b, p in zip(BUCKETS, pct):
                out.append((fs, "pct_reads_" + b, p, "%"))
        g = num(r, "gc_migrated_bytes")
        if g:
            print("  %-16s GC moved %.2f MiB during the verification: its reads (4 KiB per block) are"
                  " counted too, about %d of the 4-8K ones" % ("", g / MiB, g // 4096))
            out.append((fs, "gc_migrated_bytes_during_verify", g, "B"))
        if r["mismatches"] not in ("", "0"):
            print("  WARNING: %s: %s files failed their hash check" % (fs, r["mismatches"]))
    by = {r["fs"]: r for r in rows}
    for x, fs in pairs(list(by)):
        for m, label in (("verify_s", "verify time"), ("install_s", "install time")):
            z, o = num(by[x], m), num(by[fs], m)
            if z and o:
                out.append(("%s/%s" % (x, fs), "ratio_" + m, o / z, "x"))
                print("  ratio %s/%s %-14s %.3f  (time of %s / time of %s: > 1, %s is faster)" % (
                    x, fs, label, o / z, fs, x, x))
    devmodel.iv_summary(rows, out)
    if a.out:
        write_rows(a.out, ["fs", "metric", "value", "unit"],
                   [(f, m, "%.3f" % v if isinstance(v, float) else v, u) for f, m, v, u in out])


def iv_plot(a):
    rows = load_csv(a.csv)
    tmp = a.png + ".dat"
    have = []
    with open(tmp, "w") as f:
        f.write("bucket " + " ".join(r["fs"] for r in rows) + "\n")
        for b, l in zip(BUCKETS, BUCKET_LABELS):
            vals = []
            for r in rows:
                n = [num(r, "reads_" + x) or 0 for x in BUCKETS]
                vals.append("%.3f" % (100.0 * (num(r, "reads_" + b) or 0) / sum(n)) if sum(n) else "0")
            f.write('"%s" %s\n' % (l, " ".join(vals)))
    for i, r in enumerate(rows):
        have.append("'%s' using %d:xtic(1) title '%s (verify %.1f s)'" % (tmp, i + 2, r["fs"], num(r, "verify_s")))
    script = """set terminal pngcairo size 900,500 font ',10'
set output '%s'
set title 'Device reads by size while verifying the installed tree (%% of reads)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set yrange [0:100]
set ylabel '%% of device reads'
set xlabel 'read size'
plot %s
""" % (a.png, ", ".join(have))
    gnuplot(script, a.png)
    os.unlink(tmp)


# ---- tools/bench-randrange --------------------------------------------------------------------
RR_BASE_COLUMNS = ["fs", "range_bytes", "range_GiB", "job", "iops", "MiBps", "mean_us", "p50_us",
                   "p99_us", "direct"]
# on the emulator's NAND model: reads per simulated second, their mean unloaded service time,
# map misses, and the addresses the map cache covers (0: zoned, all resident)
RR_DEV_COLUMNS = ["dev_iops", "dev_read_us", "dev_map_miss_pct", "dev_cover_bytes"]
RR_COLUMNS = RR_BASE_COLUMNS + RR_DEV_COLUMNS


def fio_rows(a):
    text = open(a.json).read()
    d = json.loads(text[text.index("{"):])
    j = d["jobs"][0]
    if j["error"]:
        sys.exit("fio %s: error %d" % (a.json, j["error"]))
    r = j["read"]
    pct = r["clat_ns"].get("percentile", {})
    after = devmodel.load(a.dev_after)
    d = devmodel.delta(devmodel.load(a.dev_before), after)
    dev = [devmodel.cell(devmodel.iops(d), 1), devmodel.cell(devmodel.read_us(d)),
           devmodel.cell(devmodel.miss_pct(d)), devmodel.cover_bytes(after) if d else ""]
    print("%s,%d,%.3f,%s,%.1f,%.2f,%.1f,%.1f,%.1f,%s,%s" % (
        a.fs, a.range, a.range / GiB, a.job, r["iops"], r["bw_bytes"] / MiB, r["clat_ns"]["mean"] / 1e3,
        pct.get("50.000000", 0) / 1e3, pct.get("99.000000", 0) / 1e3, a.direct, ",".join(str(x) for x in dev)))


def rr_summary(a):
    rows = load_checked(a.csv, RR_BASE_COLUMNS, "bench-randrange")
    by = {}
    for r in rows:
        by.setdefault((r["fs"], r["job"]), {})[int(r["range_bytes"])] = r
    out = []
    print("Random 4 KiB reads over a growing range: %s" % a.csv)
    for (fs, job), rs in sorted(by.items()):
        ks = sorted(rs)
        lo, hi = rs[ks[0]], rs[ks[-1]]
        drop = 100.0 * (1 - num(hi, "iops") / num(lo, "iops")) if num(lo, "iops") else 0.0
        print("  %-16s %-7s IOPS %s; drop from %s to %s: %.1f%%; p99 us %s" % (
            fs, job, " ".join("%s:%.0f" % (fsize(k), num(rs[k], "iops")) for k in ks),
            fsize(ks[0]), fsize(ks[-1]), drop, " ".join("%s:%.0f" % (fsize(k), num(rs[k], "p99_us")) for k in ks)))
        out += [(fs, job, "iops_smallest_range", num(lo, "iops")), (fs, job, "iops_largest_range", num(hi, "iops")),
                (fs, job, "iops_drop_pct", drop)]
    fss = sorted({fs for fs, _ in by})
    for x, b in pairs(fss):
        for job in sorted({j for _, j in by}):
            z, o = by.get((x, job)), by.get((b, job))
            if not z or not o:
                continue
            common = sorted(set(z) & set(o))
            rat = [(k, num(z[k], "iops") / num(o[k], "iops")) for k in common if num(o[k], "iops")]
            print("  ratio %s/%s %-7s IOPS by range: %s" % (
                x, b, job, " ".join("%s:%.3f" % (fsize(k), v) for k, v in rat)))
            for k, v in rat:
                out.append(("%s/%s" % (x, b), job, "ratio_iops_%dM" % (k >> 20), v))
    devmodel.rr_summary(by, fsize, out)
    if a.out:
        write_rows(a.out, ["fs", "job", "metric", "value"],
                   [(f, j, m, "%.3f" % v if isinstance(v, float) else v) for f, j, m, v in out])


def rr_plot(a):
    rows = load_csv(a.csv)
    by = {}
    for r in rows:
        by.setdefault((r["fs"], r["job"]), []).append(r)
    tmp = a.png + ".d"
    os.makedirs(tmp, exist_ok=True)
    iops, lat = [], []
    # a run on the device model: IOPS in device time and the map misses below (the wall
    # clock of an emulated guest says little)
    dev = devmodel.has_dev(rows, "dev_iops")
    cols = ("dev_iops", "dev_read_us", "dev_map_miss_pct") if dev else ("iops", "p50_us", "p99_us")
    for (fs, job), rs in sorted(by.items()):
        rs.sort(key=lambda r: int(r["range_bytes"]))
        p = os.path.join(tmp, "%s-%s.dat" % (fs.replace("/", "_"), job))
        with open(p, "w") as f:
            for r in rs:
                f.write("%s %s %s %s\n" % ((r["range_GiB"],) + tuple(r[c] for c in cols)))
        iops.append("'%s' using 1:2 with linespoints pt 7 title '%s %s'" % (p, fs, job))
        lat.append("'%s' using 1:4 with linespoints pt 7 title '%s %s%s'" % (p, fs, job, "" if dev else " p99"))
    script = """set terminal pngcairo size 1000,700 font ',10'
set output '%s'
set multiplot layout 2,1 title 'fio 4 KiB random reads over the first N GiB of a file%s'
set grid
set logscale x 2
set format x '%%g'
set key outside right
set lmargin at screen 0.08
set rmargin at screen 0.74
set xlabel 'range (GiB)'
set ylabel '%s'
set yrange [0:*]
plot %s
set ylabel '%s'
%s
plot %s
unset multiplot
""" % (a.png, " (simulated device time)" if dev else "", "IOPS (device time)" if dev else "IOPS",
       ", ".join(iops), "map misses (%)" if dev else "p99 completion latency (us)",
       "set yrange [0:100]" if dev else "set logscale y\nset yrange [*:*]", ", ".join(lat))
    gnuplot(script, a.png)
    shutil.rmtree(tmp, ignore_errors=True)


def on_term(signum, frame):
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, on_term)  # the scripts stop a workload with TERM: clean up as for ^C
    ap = argparse.ArgumentParser(prog="workloads.py")
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("age-run")
    p.add_argument("dir")
    p.add_argument("--fs", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--ctl")
    p.add_argument("--mnt")
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--file-size", type=int, default=131072)
    p.add_argument("--test-size", type=int, required=True)
    p.add_argument("--min-free", type=int, required=True)
    p.add_argument("--max-iters", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=0)
    p.add_argument("--block", type=int, default=1 << 20)
    p.add_argument("--dev-control", help="the NBD server's control socket or port ('auto': the guest's)")
    p.set_defaults(fn=age_run)
    for name, fn in (("age-summary", age_summary), ("iv-summary", iv_summary), ("rr-summary", rr_summary)):
        p = sp.add_parser(name)
        p.add_argument("csv")
        p.add_argument("--out", help="also write the figures as CSV (fs, metric, value, ...)")
        if name == "age-summary":
            p.add_argument("--first", type=int, default=3, help="iterations that make the baseline")
            p.add_argument("--window", type=int, default=5, help="iterations of the median floor")
        p.set_defaults(fn=fn)
    for name, fn in (("age-plot", age_plot), ("iv-plot", iv_plot), ("rr-plot", rr_plot)):
        p = sp.add_parser(name)
        p.add_argument("csv")
        p.add_argument("png")
        p.set_defaults(fn=fn)
    p = sp.add_parser("iv-install")
    p.add_argument("dir")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--packs", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--manifest", required=True)
    p.set_defaults(fn=iv_install)
    p = sp.add_parser("iv-verify")
    p.add_argument("dir")
    p.add_argument("--manifest", required=True)
    p.set_defaults(fn=iv_verify)
    p = sp.add_parser("fio-rows")
    p.add_argument("json")
    p.add_argument("fs")
    p.add_argument("range", type=int)
    p.add_argument("job")
    p.add_argument("--direct", default="1")
    p.add_argument("--dev-before", help="dev-snap before the fio run")
    p.add_argument("--dev-after", help="dev-snap after it")
    p.set_defaults(fn=fio_rows)
    p = sp.add_parser("iv-row")
    p.add_argument("out")
    p.add_argument("tag")
    p.add_argument("label")
    p.add_argument("aged")
    p.add_argument("used")
    p.add_argument("b0", nargs="?", default="")
    p.add_argument("b1", nargs="?", default="")
    p.set_defaults(fn=iv_row)
    p = sp.add_parser("dev-snap")
    p.add_argument("file")
    p.add_argument("--ctl")
    p.add_argument("--mnt")
    p.add_argument("--dev-control")
    p.add_argument("--sync", action="store_true", help="write back what the filesystem holds first")
    p.set_defaults(fn=dev_snap)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
