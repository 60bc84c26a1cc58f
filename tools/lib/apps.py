#!/usr/bin/env python3
"""tools/lib/apps.py - the Python side of tools/bench-apps: the three applications, timed
phase by phase with the device's figures around each, the summary table (from the CSV alone,
so a test can feed it a known CSV) and the gnuplot plot. Standard library only.

  apps.py run APP DIR --csv FILE --fs LABEL --version NAME --round N --outdir D [options]
      APP: rocksdb (db_bench fillrandom, overwrite, readrandom; rocksdb-nofalloc: the same
      with allow_fallocate=false, through an options file), sqlite (a messaging table,
      WAL then rollback journal) or tree (untar, git add, git commit, rm -rf); one CSV row
      per phase appended to FILE
  apps.py make-tree TARBALL DIR...      a deterministic tarball of the DIRs (prints files, bytes)
  apps.py fsck-row --csv FILE ... STATUS NOTE     the row of fsck.zlfs -n after a zlfs run
  apps.py summary CSV [--out FILE]
  apps.py plot CSV PNG

Every phase is timed alone; then, untimed, the filesystem is synced (zlfs-ctl sync for zlfs,
syncfs for a kernel filesystem: --sync-path) so that the device bytes of a phase are its own.
Figures of a phase: the application's bytes written (wchar of its processes: what it handed
the filesystem), the device's bytes written and flushes (zlfs: zlfs-ctl stats, the emulator's
counters; ext4 and the passthrough over it: the loop device's /sys/block/NAME/stat), and for
zlfs its own WAF (device over user bytes), GC bytes moved, zones reclaimed and phase changes
(the "GC phase" lines of the daemon's log, or the stats' transitions, which keep the last 32).
"""
import argparse
import csv
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import workloads
from workloads import median, write_rows

MiB = float(1 << 20)
COLUMNS = ["round", "version", "fs", "app", "phase", "status", "seconds", "ops", "ops_per_s",
           "app_write_bytes", "dev_write_bytes", "dev_flushes", "waf", "zlfs_user_bytes",
           "zlfs_dev_bytes", "zlfs_waf", "gc_moved_bytes", "gc_zones", "gc_phase_changes",
           "used_pct", "peak_used_pct", "load1", "note", "host_syncs"]
# phase -> (figure, higher is better, unit): the figure the ratios compare
FIGURE = {"fillrandom": ("ops_per_s", True, "ops/s"), "overwrite": ("ops_per_s", True, "ops/s"),
          "readrandom": ("ops_per_s", True, "ops/s"),
          "fillrandom-nofalloc": ("ops_per_s", True, "ops/s"),
          "overwrite-nofalloc": ("ops_per_s", True, "ops/s"),
          "readrandom-nofalloc": ("ops_per_s", True, "ops/s"),
          "untar": ("seconds", False, "s"), "git-add": ("seconds", False, "s"),
          "git-commit": ("seconds", False, "s"), "rm": ("seconds", False, "s")}
for _m in ("wal", "rollback"):
    FIGURE[_m + "-insert"] = ("ops_per_s", True, "commit/s")
    FIGURE[_m + "-churn"] = ("ops_per_s", True, "commit/s")
    FIGURE[_m + "-select"] = ("ops_per_s", True, "sel/s")
ORDER = list(FIGURE)
COMMIT_PHASES = {p for p, f in FIGURE.items() if f[2] == "commit/s"}


# ---- what the device did ----------------------------------------------------------------------
class Probe:
    """Snapshots of the filesystem under test: zlfs-ctl stats, the loop device's counters."""

    def __init__(self, a):
        self.ctl, self.mnt, self.blkdev, self.sync_path = a.ctl, a.mnt, a.blkdev, a.sync_path
        self.dir, self.daemon_log = a.dir, a.daemon_log

    def sync(self):
        if self.ctl:
            subprocess.run([self.ctl, "sync", self.mnt], check=True, stdout=subprocess.DEVNULL)
        elif self.sync_path:
            subprocess.run(["sync", "-f", self.sync_path], check=True)

    def snap(self):
        s = {"t": time.time()}
        if self.ctl:
            st = workloads.ctl_stats(self.ctl, self.mnt)
            g = st["gc"]
            s.update(user=st["bytes_written_by_users"], dev=st["bytes_written_to_device"],
                     flushes=st.get("device_model", {}).get("host_flushes"),
                     syncs=st.get("device_model", {}).get("image_syncs"),
                     gc_moved=g["bytes_migrated"], gc_zones=g["zones_reclaimed"],
                     transitions=[t["time_ns"] for t in g["transitions"]],
                     logged=self.logged_changes())
        elif self.blkdev:
            with open("/sys/block/%s/stat" % self.blkdev) as f:
                v = [int(x) for x in f.read().split()]
            s.update(dev=v[6] * 512, flushes=v[15] if len(v) > 15 else None)
        return s

    def logged_changes(self):
        """Phase changes the daemon logged so far (the stats keep only the last 32)."""
        try:
            with open(self.daemon_log, errors="replace") as f:
                return sum(1 for l in f if "GC phase " in l)
        except (OSError, TypeError):
            return 0

    def used_pct(self):
        st = os.statvfs(self.dir)
        return 100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks if st.f_blocks else 0.0


class PeakUse(threading.Thread):
    """The highest use of the filesystem during a phase, polled every half second."""

    def __init__(self, probe):
        super().__init__(daemon=True)
        self.probe, self.peak, self.stop = probe, probe.used_pct(), threading.Event()
        self.start()

    def run(self):
        while not self.stop.wait(0.5):
            try:
                self.peak = max(self.peak, self.probe.used_pct())
            except OSError:
                pass

    def done(self):
        self.stop.set()
        self.join()
        return self.peak


class Perf:
    """perf record of the daemon during the phases named, as tools/bench --perf does."""

    def __init__(self, a):
        self.pid, self.phases, self.out, self.tag = a.perf_pid, set(a.perf_phases or ()), a.outdir, a.tag
        self.proc = None

    def start(self, phase):
        if not self.pid or phase not in self.phases:
            return
        self.data = os.path.join(self.out, "perf-%s-%s.data" % (self.tag, phase))
        self.proc = subprocess.Popen(["perf", "record", "-F", "249", "--call-graph", "dwarf,8192",
                                      "-p", str(self.pid), "-o", self.data],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

    def stop(self, phase):
        if not self.proc:
            return
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()
        self.proc = None
        base = self.data[:-5]
        for extra, suffix in ((["--no-children", "--percent-limit", "1"], ".txt"),
                              (["--children", "--percent-limit", "5", "-g", "none"], "-children.txt")):
            with open(base + suffix, "w") as f:
                subprocess.run(["perf", "report", "-i", self.data, "--stdio"] + extra,
                               stdout=f, stderr=subprocess.DEVNULL)


def wchar(pid="self"):
    with open("/proc/%s/io" % pid) as f:
        return int(re.search(r"^wchar: (\d+)", f.read(), re.M).group(1))


def run_cmd(argv, log, cwd=None, env=None):
    """Run ARGV (output to LOG); returns (exit code, bytes it wrote). Read before reaping:
    a process's counters go with it."""
    with open(log, "ab") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        try:
            w = wchar(p.pid)
        except OSError:
            w = None
        return p.wait(), w


class Runner:
    """Runs phases and appends their rows to the CSV."""

    def __init__(self, a):
        self.a, self.probe, self.perf = a, Probe(a), Perf(a)
        self.failed = None

    def phase(self, name, fn):
        """FN() -> (ops, app bytes written or None, ops_per_s or None); a failure is a row."""
        a = self.a
        row = dict.fromkeys(COLUMNS, "")
        row.update({"round": a.round, "version": a.version, "fs": a.fs, "app": a.app,
                    "phase": name, "load1": open("/proc/loadavg").read().split()[0]})
        if self.failed:
            row.update(status="skipped", note="after %s failed" % self.failed)
            return self.emit(row)
        before = self.probe.snap()
        peak = PeakUse(self.probe)
        self.perf.start(name)
        t0 = time.perf_counter()
        try:
            ops, app_bytes, rate = fn()
            err = None
        except Exception as e:  # the application failed: a row that says so, then the next run
            err = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        secs = time.perf_counter() - t0
        self.perf.stop(name)
        peak = peak.done()
        try:
            self.probe.sync()
        except (OSError, subprocess.CalledProcessError) as e:
            err = err or "sync failed: %s" % e
        after = self.probe.snap()
        used = self.probe.used_pct()
        row.update(used_pct="%.1f" % used, peak_used_pct="%.1f" % max(peak, used))
        if err:  # what the device did up to the failure is kept; the summary skips the row
            self.failed = name
            row.update(status="failed", seconds="%.3f" % secs, note=err.replace(",", ";"))
            self.figures(row, before, after, None)
            return self.emit(row)
        row.update(status="ok", seconds="%.3f" % secs, ops=ops,
                   ops_per_s="%.1f" % (rate if rate is not None else ops / secs if secs else 0))
        self.figures(row, before, after, app_bytes)
        return self.emit(row)

    @staticmethod
    def figures(row, b, e, app_bytes):
        d = lambda k: e[k] - b[k] if e.get(k) is not None and b.get(k) is not None else None
        dev = d("dev")
        if app_bytes is not None:
            row["app_write_bytes"] = app_bytes
        if dev is not None:
            row["dev_write_bytes"] = dev
        if d("flushes") is not None:
            row["dev_flushes"] = d("flushes")
        if d("syncs") is not None:  # zlfs: the emulator's fdatasyncs of its image
            row["host_syncs"] = d("syncs")
        if dev is not None and app_bytes:
            row["waf"] = "%.3f" % (dev / app_bytes)
        if "user" in e:
            u = d("user")
            row.update(zlfs_user_bytes=u, zlfs_dev_bytes=dev, gc_moved_bytes=d("gc_moved"),
                       gc_zones=d("gc_zones"),
                       gc_phase_changes=max(d("logged"), sum(1 for t in e["transitions"]
                                                             if t > max(b["transitions"], default=0))))
            if u:
                row["zlfs_waf"] = "%.3f" % (dev / u)

    def emit(self, row):
        with open(self.a.csv, "a", newline="") as f:
            csv.writer(f, lineterminator="\n").writerow([row[c] for c in COLUMNS])
        print("%s %s %s: %s %s%s" % (row["fs"], row["app"], row["phase"], row["status"],
                                    row["ops_per_s"] or "", " " + row["note"] if row["note"] else ""),
              file=sys.stderr)


# ---- RocksDB ----------------------------------------------------------------------------------
DB_RATE = re.compile(r"^(\w+)\s*:\s*[\d.]+ micros/op (\d+) ops/sec", re.M)


def nofalloc_options(a, common):
    """An options file of the same options but allow_fallocate=false (db_bench has no flag for
    it): the OPTIONS file RocksDB writes for a one-key DB in OUTDIR, edited."""
    tmp = os.path.join(a.outdir, "rocksdb-options-db")
    subprocess.run(["rm", "-rf", tmp], check=True)
    argv = [x for x in common if not x.startswith(("--db=", "--num="))]
    subprocess.run(argv + ["--db=" + tmp, "--num=1", "--benchmarks=fillseq"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    src = sorted(f for f in os.listdir(tmp) if f.startswith("OPTIONS-"))[-1]
    with open(os.path.join(tmp, src)) as f:
        text = f.read()
    if "allow_fallocate=true" not in text:
        raise SystemExit("rocksdb-nofalloc: %s has no allow_fallocate=true" % src)
    path = os.path.join(a.outdir, "rocksdb-nofalloc.ini")
    with open(path, "w") as f:
        f.write(text.replace("allow_fallocate=true", "allow_fallocate=false"))
    subprocess.run(["rm", "-rf", tmp], check=True)
    with open(a.commands, "a") as c:
        c.write("# rocksdb-nofalloc: %s is the OPTIONS file of `%s --db=TMP --num=1 --benchmarks=fillseq`"
                " with allow_fallocate=false\n" % (path, " ".join(argv)))
    return path


def rocksdb(a, r, nofalloc=False):
    db = os.path.join(a.dir, "db")
    common = ["db_bench", "--db=" + db, "--num=%d" % a.num, "--value_size=1000", "--key_size=16",
              "--compression_type=none", "--target_file_size_base=%d" % (64 << 20), "--seed=1",
              "--threads=1"]
    if nofalloc:
        common.append("--options_file=" + nofalloc_options(a, common))
    for bench, extra in (("fillrandom", []), ("overwrite", ["--use_existing_db=1"]),
                         ("readrandom", ["--use_existing_db=1", "--reads=%d" % a.reads])):
        argv = common + ["--benchmarks=" + bench] + extra
        log = os.path.join(a.outdir, "db_bench-%s-%s.log" % (a.tag, bench))

        def fn(argv=argv, log=log, bench=bench):
            with open(a.commands, "a") as c:
                c.write("%s   # %s, log %s\n" % (" ".join(argv), a.tag, log))
            start = os.path.getsize(log) if os.path.exists(log) else 0
            rc, w = run_cmd(argv, log)
            with open(log, errors="replace") as f:
                f.seek(start)
                text = f.read()
            m = [x for x in DB_RATE.finditer(text) if x.group(1) == bench]
            if rc or not m:  # how far it got, and the first error it gave
                done = re.findall(r"finished (\d+) ops", text)
                errs = [l for l in re.split(r"[\r\n]+|\.\.\. finished \d+ ops", text)
                        if re.search(r"error|assert|no space", l, re.I)] or ["no error message"]
                try:  # RocksDB's own log says what the filesystem answered
                    with open(os.path.join(db, "LOG"), errors="replace") as f:
                        dblog = f.read().splitlines()
                    with open(log[:-4] + "-LOG.txt", "w") as f:
                        f.write("\n".join(dblog[-200:]) + "\n")
                    errs = [l.split("] ", 1)[-1] for l in dblog
                            if re.search(r"IO error|Corruption|No space", l)][:1] + errs
                except OSError:
                    pass
                raise RuntimeError("db_bench %s exited with %d after %s ops: %s"
                                   % (bench, rc, done[-1] if done else 0, errs[0].strip()))
            n = a.reads if bench == "readrandom" else a.num
            return n, w, float(m[-1].group(2))
        r.phase(bench + ("-nofalloc" if nofalloc else ""), fn)


# ---- SQLite as a messaging database -----------------------------------------------------------
SCHEMA = """CREATE TABLE messages(id INTEGER PRIMARY KEY, conv INTEGER NOT NULL,
  ts INTEGER NOT NULL, sender TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX messages_conv_ts ON messages(conv, ts);"""
CONVS = 1000


def sqlite_app(a, r):
    for mode, journal in (("wal", "WAL"), ("rollback", "DELETE")):
        path = os.path.join(a.dir, "messages-%s.db" % mode)
        db = sqlite3.connect(path, isolation_level=None)  # autocommit: one statement, one commit
        got = db.execute("PRAGMA journal_mode=%s" % journal).fetchone()[0]
        if got.upper() != journal:
            raise SystemExit("sqlite: journal_mode %s gave %s" % (journal, got))
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(SCHEMA)
        rnd = random.Random(7)
        state = {"ts": 0}
        with open(a.commands, "a") as c:
            c.write("# sqlite %s (%s, libsqlite3 %s): journal_mode=%s synchronous=FULL; %d one-row "
                    "INSERT transactions, %d of 5 deletes + 5 inserts, %d indexed selects\n"
                    % (mode, path, sqlite3.sqlite_version, journal, a.sql_n, a.sql_n // 10, a.sql_selects))

        def row():
            state["ts"] += 1
            body = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rnd.randrange(80, 400)))
            return (rnd.randrange(CONVS), state["ts"], "user%d" % rnd.randrange(5000), body)

        def insert():
            w0 = wchar()
            for _ in range(a.sql_n):
                db.execute("INSERT INTO messages(conv, ts, sender, body) VALUES (?, ?, ?, ?)", row())
            return a.sql_n, wchar() - w0, None

        def churn():
            w0 = wchar()
            n = a.sql_n // 10
            for _ in range(n):
                db.execute("BEGIN")
                db.execute("DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE conv = ? "
                           "ORDER BY ts LIMIT 5)", (rnd.randrange(CONVS),))
                for _ in range(5):
                    db.execute("INSERT INTO messages(conv, ts, sender, body) VALUES (?, ?, ?, ?)", row())
                db.execute("COMMIT")
            return n, wchar() - w0, None

        def select():
            w0 = wchar()
            for _ in range(a.sql_selects):
                db.execute("SELECT id, sender, body FROM messages WHERE conv = ? ORDER BY ts DESC "
                           "LIMIT 20", (rnd.randrange(CONVS),)).fetchall()
            return a.sql_selects, wchar() - w0, None

        for name, fn in (("insert", insert), ("churn", churn), ("select", select)):
            r.phase("%s-%s" % (mode, name), fn)
        db.close()


# ---- a source tree ----------------------------------------------------------------------------
def tree(a, r):
    t = os.path.join(a.dir, "tree")
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=a.outdir, GIT_AUTHOR_DATE="2020-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2020-01-01T00:00:00Z")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0"]
    log = os.path.join(a.outdir, "tree-%s.log" % a.tag)
    files = [0]

    def steps(*cmds, cwd=None):
        def fn():
            total = 0
            for argv in cmds:
                with open(a.commands, "a") as c:
                    c.write("%s%s   # %s\n" % ("cd %s && " % cwd if cwd else "", " ".join(argv), a.tag))
                rc, w = run_cmd(argv, log, cwd=cwd, env=env)
                if rc:
                    raise RuntimeError("%s exited with %d (log %s)" % (" ".join(argv[:3]), rc, log))
                total += w or 0
            return files[0], total, None
        return fn

    os.mkdir(t)
    out = subprocess.run(["tar", "-tvf", a.tarball], check=True, capture_output=True, text=True).stdout
    files[0] = sum(1 for l in out.splitlines() if l[:1] in "-l")  # files and symlinks: the ops
    r.phase("untar", steps(["tar", "-xf", a.tarball, "-C", t]))
    r.phase("git-add", steps(git + ["init", "-q"], git + ["add", "-A"], cwd=t))
    r.phase("git-commit", steps(git + ["commit", "-q", "-m", "tree"], cwd=t))
    r.phase("rm", steps(["rm", "-rf", t]))


def make_tree(a):
    """A tarball of DIRS that is the same on every run of one machine: sorted names, fixed
    times, owners and format (the content is the machine's installed files)."""
    argv = ["tar", "--sort=name", "--mtime=2020-01-01 00:00:00Z", "--owner=0", "--group=0",
            "--numeric-owner", "--format=gnu", "--ignore-failed-read", "-cf", a.tarball, "-C", "/"]
    argv += [d.lstrip("/") for d in a.dirs if os.path.isdir(d)]
    subprocess.run(argv, check=True, stderr=subprocess.DEVNULL)
    out = subprocess.run(["tar", "-tvf", a.tarball], check=True, capture_output=True, text=True).stdout
    files = [l for l in out.splitlines() if l[:1] == "-"]
    print(len(files), sum(int(l.split()[2]) for l in files))


def run(a):
    r = Runner(a)
    {"rocksdb": rocksdb, "rocksdb-nofalloc": lambda a, r: rocksdb(a, r, True),
     "sqlite": sqlite_app, "tree": tree}[a.app](a, r)


def fsck_row(a):
    row = dict.fromkeys(COLUMNS, "")
    row.update({"round": a.round, "version": a.version, "fs": a.fs, "app": a.app, "phase": "fsck",
                "status": a.status, "note": a.note.replace(",", ";")[:200]})
    with open(a.csv, "a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerow([row[c] for c in COLUMNS])


# ---- the summary ------------------------------------------------------------------------------
def fnum(v):
    if v is None:
        return "-"
    return "%.0f" % v if abs(v) >= 100 else "%.2f" % v if abs(v) < 10 else "%.1f" % v


SHORT = {"passthrough-ext4": "pt-ext4", "zlfs-buffered": "zlfs-buf"}


def short(s):
    fs, _, v = s.partition("@")
    return SHORT.get(fs, fs) + ("@" + v if v else "")


FS_ORDER = ["zlfs", "zlfs-buffered", "passthrough-ext4", "ext4"]


def fs_sorted(systems):
    """zlfs's kinds (each version in the order met), then the baselines."""
    rank = lambda s: FS_ORDER.index(s.split("@")[0]) if s.split("@")[0] in FS_ORDER else len(FS_ORDER)
    return sorted(systems, key=lambda s: (rank(s), systems.index(s)))


def system(r, rows):
    """zlfs@VERSION when the CSV has several zlfs versions, else the filesystem's name."""
    if r["version"] in ("", "-") or len({x["version"] for x in rows} - {"", "-"}) < 2:
        return r["fs"]
    return "%s@%s" % (r["fs"], r["version"])


def summarise(a):
    rows = workloads.load_checked(a.csv, COLUMNS, "bench-apps")
    systems, cells, fails, fsck = [], {}, [], {}
    for r in rows:
        key = system(r, rows)
        if key not in systems:
            systems.append(key)
        if r["phase"] == "fsck":
            fsck.setdefault(key, []).append(r["status"])
            continue
        if r["status"] != "ok":
            fails.append("%s %s %s round %s: %s%s" % (key, r["app"], r["phase"], r["round"],
                                                       r["status"], " (" + r["note"] + ")" if r["note"] else ""))
            continue
        c = cells.setdefault((key, r["phase"]), {})
        for k in ("seconds", "ops_per_s", "dev_flushes", "dev_write_bytes", "app_write_bytes", "waf",
                  "zlfs_waf", "gc_moved_bytes", "gc_phase_changes", "ops", "peak_used_pct", "load1",
                  "host_syncs"):
            if r.get(k, "") not in ("", None):
                c.setdefault(k, []).append(float(r[k]))
    systems = fs_sorted(systems)
    med = {k: {m: median(v) for m, v in c.items()} for k, c in cells.items()}
    zl = [s for s in systems if s.startswith("zlfs")]
    base = [b for b in ("passthrough-ext4", "ext4") if b in systems]
    out = []
    print("Real applications (tools/bench-apps): medians of %d round(s); ratio > 1: zlfs is better"
          % len({r["round"] for r in rows}))
    head = "%-19s %-8s" % ("phase", "unit") + "".join(" %13s" % short(s)[:13] for s in systems)
    head += "".join(" %16s" % ("%s/%s" % (short(z), short(b))) for z in zl for b in base)
    print(head)
    for ph in ORDER:
        fig, higher, unit = FIGURE[ph]
        if not any((s, ph) in med for s in systems):
            continue
        line = "%-19s %-8s" % (ph, unit)
        for s in systems:
            v = med.get((s, ph), {}).get(fig)
            line += " %13s" % fnum(v)
            if v is not None:
                out.append((s, ph, fig, v))
        for z in zl:
            for b in base:
                zv, bv = med.get((z, ph), {}).get(fig), med.get((b, ph), {}).get(fig)
                ratio = None
                if zv and bv:
                    ratio = zv / bv if higher else bv / zv
                    out.append(("%s/%s" % (z, b), ph, "ratio", ratio))
                line += " %16s" % ("-" if ratio is None else "%.2f" % ratio)
        print(line)
    print("\nWhat each phase cost the device (WAF: device bytes over the application's bytes written;"
          "\nzlfs WAF: over the bytes zlfs was handed; flushes and device KiB per operation;"
          "\nsync/fl: zlfs's image fdatasyncs per device flush):")
    print("%-19s %-16s %7s %7s %9s %7s %9s %9s %8s %7s %6s" % ("phase", "fs", "WAF", "zlfsWAF", "flush/op",
                                                             "sync/fl", "devKiB/op", "appKiB/op", "GC MiB",
                                                             "GCphch", "peak%"))
    for ph in ORDER:
        for s in systems:
            m = med.get((s, ph))
            if not m:
                continue
            ops = m.get("ops") or 0
            per = lambda k, scale=1.0: m[k] / ops / scale if ops and k in m else None
            spf = m["host_syncs"] / m["dev_flushes"] if m.get("dev_flushes") and "host_syncs" in m else None
            print("%-19s %-16s %7s %7s %9s %7s %9s %9s %8s %7s %6s" % (
                ph, short(s)[:16], fnum(m.get("waf")), fnum(m.get("zlfs_waf")), fnum(per("dev_flushes")),
                fnum(spf),
                fnum(per("dev_write_bytes", 1024.0)), fnum(per("app_write_bytes", 1024.0)),
                fnum(m["gc_moved_bytes"] / MiB) if "gc_moved_bytes" in m else "-",
                fnum(m.get("gc_phase_changes")), fnum(m.get("peak_used_pct"))))
            for k in ("waf", "zlfs_waf", "peak_used_pct"):
                if k in m:
                    out.append((s, ph, k, m[k]))
            if per("dev_flushes") is not None:
                out.append((s, ph, "flushes_per_op", per("dev_flushes")))
            if spf is not None:
                out.append((s, ph, "syncs_per_flush", spf))
            if per("dev_write_bytes") is not None:
                out.append((s, ph, "dev_bytes_per_op", per("dev_write_bytes")))
    loads = [float(r["load1"]) for r in rows if r["load1"]]
    if loads:
        print("\nload average (1 min) at the phases' starts: min %.2f, median %.2f, max %.2f"
              % (min(loads), median(loads), max(loads)))
    for s in systems:
        if s in fsck:
            dirty = [x for x in fsck[s] if x != "clean"]
            print("fsck.zlfs -n after %s: %s" % (s, "clean in all %d runs" % len(fsck[s]) if not dirty
                                                  else "NOT CLEAN in %d of %d runs" % (len(dirty), len(fsck[s]))))
            out.append((s, "fsck", "dirty_runs", float(len(dirty))))
    for f in fails:
        print("FAILED: " + f)
    if a.out:
        write_rows(a.out, ["fs", "phase", "metric", "value"],
                   [(s, p, m, "%.4f" % v) for s, p, m, v in out])


def plot(a):
    rows = workloads.load_checked(a.csv, COLUMNS, "bench-apps")
    vals, systems = {}, []
    for r in rows:
        if r["status"] != "ok" or r["phase"] not in FIGURE:
            continue
        key = system(r, rows)
        if key not in systems:
            systems.append(key)
        vals.setdefault((key, r["phase"]), []).append(float(r[FIGURE[r["phase"]][0]]))
    systems = fs_sorted(systems)
    ref = "passthrough-ext4" if "passthrough-ext4" in systems else systems[0] if systems else None
    phases = [p for p in ORDER if (ref, p) in vals]
    if not phases:
        sys.exit("bench-apps: %s has no phase that ran on %s" % (a.csv, ref))
    dat = a.png + ".dat"
    with open(dat, "w") as f:
        f.write("phase " + " ".join('"%s"' % s for s in systems) + "\n")
        for p in phases:
            b = median(vals[(ref, p)])
            cells = []
            for s in systems:
                v = median(vals[(s, p)]) if (s, p) in vals else None
                ok = v and b
                cells.append(("%.3f" % ((v / b) if FIGURE[p][1] else (b / v))) if ok else "0")
            f.write("%s %s\n" % (p, " ".join(cells)))
    script = """set terminal pngcairo size 1200,600 font ',10'
set output '%s'
set title 'tools/bench-apps: speed relative to %s (> 1: faster; 0: failed or not run)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key outside right
set xtics rotate by -35
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2
plot for [i=2:%d] '%s' using i:xtic(1) title columnheader(i)
""" % (a.png, ref, len(systems) + 1, dat)
    workloads.gnuplot(script, a.png)
    os.remove(dat)


def main():
    ap = argparse.ArgumentParser(prog="apps.py")
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("run")
    p.add_argument("app", choices=["rocksdb", "rocksdb-nofalloc", "sqlite", "tree"])
    p.add_argument("dir")
    for k in ("csv", "fs", "version", "round", "outdir", "commands"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--tag", required=True, help="names the logs: FS-APP-rROUND")
    p.add_argument("--ctl")
    p.add_argument("--mnt")
    p.add_argument("--blkdev")
    p.add_argument("--daemon-log", help="zlfs's log: its GC phase lines count the changes")
    p.add_argument("--sync-path")
    p.add_argument("--num", type=int, default=100000)
    p.add_argument("--reads", type=int, default=100000)
    p.add_argument("--sql-n", type=int, default=20000)
    p.add_argument("--sql-selects", type=int, default=50000)
    p.add_argument("--tarball")
    p.add_argument("--perf-pid", type=int)
    p.add_argument("--perf-phases", type=lambda s: s.split(","))
    p.set_defaults(fn=run)
    p = sp.add_parser("make-tree")
    p.add_argument("tarball")
    p.add_argument("dirs", nargs="+")
    p.set_defaults(fn=make_tree)
    p = sp.add_parser("fsck-row")
    for k in ("csv", "fs", "version", "round", "app"):
        p.add_argument("--" + k, required=True)
    p.add_argument("status")
    p.add_argument("note")
    p.set_defaults(fn=fsck_row)
    p = sp.add_parser("summary")
    p.add_argument("csv")
    p.add_argument("--out")
    p.set_defaults(fn=summarise)
    p = sp.add_parser("plot")
    p.add_argument("csv")
    p.add_argument("png")
    p.set_defaults(fn=plot)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
