#!/usr/bin/env python3
"""tools/lib/compress.py - the Python side of tools/bench-compress: the corpora, the phases
run on a mounted zlfs (each one CSV row), the summary table (from the CSV alone, so a test
can feed it a known CSV) and the gnuplot plot. Standard library only (fio for random reads).

  compress.py corpora DIR [--tree-dirs A,B] [--tree-mb N] [--sqlite-mb N] [--logs-mb N]
                          [--random-mb N] [--text-mb N]
      makes DIR/tree, DIR/sqlite, DIR/logs, DIR/random (the four corpora), DIR/text.dat
      (compressible data for the throughput phases: the tree's files one after the other) and
      DIR/random.dat; prints what it made as JSON
  compress.py phase TEST --csv F --round N --fs FS --mnt M --ctl ZLFS_CTL --corpus DIR
                         [--limit JSON] [--runtime S] [--append-mb N]
      one phase on the mounted zlfs; TEST: store-CORPUS (copy the corpus in), append-logs
      (the logs' first --append-mb written again line by line, a write per line),
      seqwrite-text, seqwrite-random (dd 1 MiB writes and fsync), seqread-text,
      seqread-random (dd 1 MiB reads; the caller drops caches and remounts first),
      randread-text (fio 4 KiB random reads, QD1, O_DIRECT)
  compress.py churn-row --csv F --round N --fs FS --json GCWAF.json    the churn's row
  compress.py rss-row --csv F --round N --fs FS --pid PID --test T   the daemon's peak RSS
      (VmHWM) as row T: rss-write (the mount of the store, append and write phases) or
      rss-read (the mount of the read phases)
  compress.py summary CSV [--out FILE]
  compress.py plot CSV PNG

Device bytes are zlfs-ctl stats' bytes_written_to_device around the phase, after a checkpoint
(zlfs-ctl sync) at each end, so they hold the data, its nodes and the checkpoints it caused;
clu_bytes_before and clu_bytes_after its "compression" figures over the phase (the plaintext
blocks the write path stored for compressed files, and what they took).
"""
import argparse
import csv
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

MiB = float(1 << 20)
COLUMNS = ["round", "fs", "test", "user_bytes", "dev_bytes", "dev_per_user", "limit_bytes",
           "limit_per_user", "ratio_limit", "seconds", "MiBps", "iops", "waf_classic",
           "gc_moved_bytes", "clu_bytes_before", "clu_bytes_after", "rss_kib", "note"]
CORPORA = ["tree", "sqlite", "logs", "random"]
FSES = ["none", "lz4", "zstd"]
RATE_TESTS = ["seqwrite-text", "seqwrite-random", "seqread-text", "seqread-random", "randread-text"]


# ---- the corpora ------------------------------------------------------------------------------
def copy_tree(srcs, dst, budget):
    """Regular files of SRCS (each its share of BUDGET bytes, sorted walk) copied into DST."""
    total = 0
    for src in srcs:
        share, used = budget // len(srcs), 0
        for root, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(files):
                p = os.path.join(root, name)
                if not os.path.isfile(p) or os.path.islink(p):
                    continue
                size = os.path.getsize(p)
                if used + size > share:
                    continue
                q = os.path.join(dst, src.strip("/").replace("/", "_"), os.path.relpath(p, src))
                os.makedirs(os.path.dirname(q), exist_ok=True)
                try:
                    shutil.copyfile(p, q)
                except OSError:
                    continue
                used += size
        total += used
    return total


WORDS = ("hello see you tomorrow at the meeting did you get my message the train is late again "
         "thanks lunch photo call me back later ok sure what time where are you on my way "
         "happy birthday weekend plans dinner tonight running late sounds good").split()


def make_sqlite(path, budget):
    """A messaging database grown by many small transactions (inserts, some deletes and
    updates), as a phone's messages are, until the file reaches BUDGET bytes."""
    rnd = random.Random(7)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE msg (id INTEGER PRIMARY KEY, conv INTEGER, t INTEGER, sender TEXT, "
               "body TEXT, read INTEGER)")
    db.execute("CREATE INDEX msg_conv ON msg (conv, t)")
    t, n = 1_600_000_000, 0
    while True:
        db.execute("BEGIN")
        for _ in range(rnd.randint(1, 8)):
            t += rnd.randint(1, 600)
            body = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 40)))
            db.execute("INSERT INTO msg (conv, t, sender, body, read) VALUES (?, ?, ?, ?, 0)",
                       (rnd.randint(1, 200), t, "+4479%08d" % rnd.randint(0, 99999999), body))
        if rnd.random() < 0.2:
            db.execute("DELETE FROM msg WHERE id = ?", (rnd.randint(1, t),))
        if rnd.random() < 0.3:
            db.execute("UPDATE msg SET read = 1 WHERE conv = ?", (rnd.randint(1, 200),))
        db.execute("COMMIT")
        n += 1
        if n % 200 == 0:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if os.path.getsize(path) >= budget:
                break
    db.close()
    return n


def make_logs(d, budget):
    """Log files appended line by line (a write per line), syslog-like: a time, a host, a
    process and its pid, and a message with numbers in it."""
    rnd = random.Random(11)
    procs = ["kernel", "systemd", "sshd", "cron", "NetworkManager", "dhclient", "app-server",
             "postgres"]
    msgs = ["connection from %d.%d.%d.%d port %d", "session opened for user u%d by uid=%d",
            "GET /api/v1/items/%d HTTP/1.1 200 %d bytes in %d ms", "checkpoint complete: wrote %d buffers",
            "link up, speed %d Mbps, duplex %d", "CPU%d: temperature above threshold, cpu clock throttled (%d)",
            "job %d finished with status %d after %d s"]
    files = [open(os.path.join(d, "%s.log" % p), "a") for p in ("syslog", "app", "auth", "daemon")]
    t, total = 1_700_000_000.0, 0
    while total < budget:
        t += rnd.expovariate(5)
        p = rnd.choice(procs)
        m = rnd.choice(msgs)
        line = "%s host%d %s[%d]: %s\n" % (time.strftime("%b %d %H:%M:%S", time.gmtime(t)), rnd.randint(1, 3),
                                           p, rnd.randint(100, 30000),
                                           m % tuple(rnd.randint(0, 65535) for _ in range(m.count("%d"))))
        f = rnd.choice(files)
        f.write(line)
        f.flush()
        total += len(line)
    for f in files:
        f.close()
    return total


def make_random(d, budget):
    """Incompressible files (as photos and packages are): a few large, some small."""
    rnd = random.Random(13)
    total, i = 0, 0
    while total < budget:
        size = min(budget - total, rnd.choice([64 << 10, 1 << 20, 4 << 20, 16 << 20]))
        with open(os.path.join(d, "r%04d.bin" % i), "wb") as f:
            f.write(os.urandom(size))
        total += size
        i += 1
    return total


def concat(src_dir, path, budget):
    """The files of SRC_DIR one after the other, repeated until BUDGET bytes: compressible
    data for the throughput phases."""
    names = sorted(os.path.join(r, n) for r, _, fs in os.walk(src_dir) for n in fs)
    if not names:
        sys.exit("compress.py: %s holds no file" % src_dir)
    total = 0
    with open(path, "wb") as out:
        while total < budget:
            for p in names:
                with open(p, "rb") as f:
                    b = f.read(budget - total)
                out.write(b)
                total += len(b)
                if total >= budget:
                    break


def corpora(a):
    made = {}
    for c in CORPORA:
        d = os.path.join(a.dir, c)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    mb = 1 << 20
    made["tree_bytes"] = copy_tree(a.tree_dirs.split(","), os.path.join(a.dir, "tree"), a.tree_mb * mb)
    made["sqlite_transactions"] = make_sqlite(os.path.join(a.dir, "sqlite", "messages.db"), a.sqlite_mb * mb)
    made["logs_bytes"] = make_logs(os.path.join(a.dir, "logs"), a.logs_mb * mb)
    made["random_bytes"] = make_random(os.path.join(a.dir, "random"), a.random_mb * mb)
    concat(os.path.join(a.dir, "tree"), os.path.join(a.dir, "text.dat"), a.text_mb * mb)
    with open(os.path.join(a.dir, "random.dat"), "wb") as f:
        for _ in range(a.text_mb):
            f.write(os.urandom(mb))
    for c in CORPORA:
        made[c + "_files"] = sum(len(fs) for _, _, fs in os.walk(os.path.join(a.dir, c)))
    print(json.dumps(made))


# ---- the phases -------------------------------------------------------------------------------
def stats(a):
    out = subprocess.run([a.ctl, "stats", a.mnt], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def sync(a):
    subprocess.run([a.ctl, "sync", a.mnt], check=True, stdout=subprocess.DEVNULL)


def tree_bytes(d):
    return sum(os.path.getsize(os.path.join(r, n)) for r, _, fs in os.walk(d) for n in fs)


def dd(args):
    """dd's own rate would count its startup too: the wall time of the whole run."""
    t = time.perf_counter()
    subprocess.run(["dd", "status=none"] + args, check=True)
    return time.perf_counter() - t


def append_lines(src_dir, dst_dir, budget):
    """The lines of SRC_DIR's logs, appended to files of DST_DIR a write per line, round robin
    over the files as the logs were made, until BUDGET bytes."""
    srcs = [open(os.path.join(src_dir, n), "rb") for n in sorted(os.listdir(src_dir))]
    dsts = [os.open(os.path.join(dst_dir, n), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for n in sorted(os.listdir(src_dir))]
    total, i = 0, 0
    try:
        while total < budget and srcs:
            line = srcs[i % len(srcs)].readline()
            if not line:
                break
            os.write(dsts[i % len(dsts)], line)
            total += len(line)
            i += 1
        for fd in dsts:
            os.fsync(fd)
    finally:
        for f in srcs:
            f.close()
        for fd in dsts:
            os.close(fd)
    return total


def fio_randread(a, path):
    j = os.path.join(a.outdir, "fio-%s-r%s.json" % (a.fs, a.round))
    args = ["fio", "--name=randread", "--filename=" + path, "--rw=randread", "--bs=4k",
            "--ioengine=psync", "--direct=1", "--time_based", "--runtime=%d" % a.runtime,
            "--norandommap", "--randrepeat=0", "--output-format=json", "--output=" + j]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    text = open(j).read()
    return json.loads(text[text.index("{"):])["jobs"][0]["read"]["iops"]


def phase(a):
    row = dict.fromkeys(COLUMNS, "")
    row.update({"round": a.round, "fs": a.fs, "test": a.test})
    test, c = a.test, a.corpus
    sync(a)
    s0 = stats(a)
    secs = ops = None
    if test.startswith("store-"):
        name = test[6:]
        if name not in CORPORA:
            sys.exit("compress.py: no corpus %s (%s)" % (name, ", ".join(CORPORA)))
        dst = os.path.join(a.mnt, name)
        t = time.perf_counter()
        subprocess.run(["cp", "-r", os.path.join(c, name), dst], check=True)
        subprocess.run(["sync", "-f", dst], check=True)
        secs = time.perf_counter() - t
        user = tree_bytes(os.path.join(c, name))
        if a.limit:
            lim = json.load(open(a.limit))
            row.update(limit_bytes=lim["stored_bytes"], limit_per_user="%.4f" % lim["ratio"])
    elif test == "append-logs":
        dst = os.path.join(a.mnt, "appended")
        os.makedirs(dst)
        t = time.perf_counter()
        user = append_lines(os.path.join(c, "logs"), dst, a.append_mb << 20)
        secs = time.perf_counter() - t
    elif test in ("seqwrite-text", "seqwrite-random"):
        src = os.path.join(c, test.split("-")[1] + ".dat")
        subprocess.run(["cat", src], check=True, stdout=subprocess.DEVNULL)  # in the host's cache
        user = os.path.getsize(src)
        secs = dd(["if=" + src, "of=" + os.path.join(a.mnt, os.path.basename(src)), "bs=1M", "conv=fsync"])
    elif test in ("seqread-text", "seqread-random"):
        f = os.path.join(a.mnt, test.split("-")[1] + ".dat")
        user = 0
        secs = dd(["if=" + f, "of=/dev/null", "bs=1M"])
        row["MiBps"] = "%.1f" % (os.path.getsize(f) / MiB / secs)
    elif test == "randread-text":
        user = 0
        ops = fio_randread(a, os.path.join(a.mnt, "text.dat"))
        row["iops"] = "%.0f" % ops
    else:
        sys.exit("compress.py: unknown test %s" % test)
    sync(a)
    s1 = stats(a)
    dev = s1["bytes_written_to_device"] - s0["bytes_written_to_device"]
    if "compression" in s1:  # zlfs-ctl stats: what the write path stored, before and after
        for k in ("before", "after"):
            row["clu_bytes_" + k] = s1["compression"]["bytes_" + k] - s0["compression"]["bytes_" + k]
    if user:
        row.update(user_bytes=user, dev_bytes=dev, dev_per_user="%.4f" % (dev / user))
        if row["limit_bytes"] != "":
            row["ratio_limit"] = "%.4f" % ((dev / user) / float(row["limit_per_user"]))
    if secs is not None:
        row["seconds"] = "%.3f" % secs
        if user and not row["MiBps"]:
            row["MiBps"] = "%.1f" % (user / MiB / secs)
    emit(a.csv, row)
    print("%s %s r%s: %s" % (a.fs, test, a.round, ", ".join("%s %s" % (k, row[k]) for k in COLUMNS[3:]
                                                             if row[k] != "")))


def churn_row(a):
    j = json.load(open(a.json))
    row = dict.fromkeys(COLUMNS, "")
    dev, user, moved = j["device_bytes"], j["user_bytes"], j["gc_bytes_migrated"]
    # classic WAF: what reached the device over what the filesystem wrote the first time
    # (device bytes less GC's moves), as if the stored bytes were the user's
    row.update({"round": a.round, "fs": a.fs, "test": "churn", "user_bytes": user, "dev_bytes": dev,
                "dev_per_user": "%.4f" % (dev / user if user else 0), "seconds": "%.3f" % j["overwrite_s"],
                "MiBps": "%.1f" % j["overwrite_MiBps"], "gc_moved_bytes": moved,
                "waf_classic": "%.4f" % (dev / (dev - moved) if dev > moved else 0),
                "note": "fill %d%% logical, df %.1f%%" % (j["fill_pct"], j["used_share"] * 100)})
    emit(a.csv, row)


def rss_row(a):
    with open("/proc/%s/status" % a.pid) as f:
        kib = int(next(l.split()[1] for l in f if l.startswith("VmHWM:")))
    row = dict.fromkeys(COLUMNS, "")
    row.update({"round": a.round, "fs": a.fs, "test": a.test, "rss_kib": kib, "note": "VmHWM"})
    emit(a.csv, row)


def emit(path, row):
    new = not os.path.exists(path) or not os.path.getsize(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow(row)


# ---- the summary ------------------------------------------------------------------------------
def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def med(rows, fs, test, col):
    v = [float(r[col]) for r in rows if r["fs"] == fs and r["test"] == test and r[col] != ""]
    return statistics.median(v) if v else None


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def summary(a):
    rows = load(a.csv)
    fses = [f for f in FSES if any(r["fs"] == f for r in rows)]
    rounds = len({r["round"] for r in rows})
    out = []
    p = out.append
    p("zlfs with and without compression (medians of %d round%s; ratios against none unless said)"
      % (rounds, "s" if rounds > 1 else ""))
    p("")
    p("device bytes / user bytes (limit: the same corpus through the same codec per cluster)")
    hdr = "%-14s" % "test" + "".join("%9s" % f for f in fses) + "".join(
        "%11s %9s" % (f + " limit", "x limit") for f in fses if f != "none") + "".join(
        "%10s" % (f + "/none") for f in fses if f != "none")
    p(hdr)
    flat = []
    tests = [t for t in ["store-" + c for c in CORPORA] + ["append-logs", "churn"]
             if any(r["test"] == t for r in rows)]
    for t in tests:
        d = {f: med(rows, f, t, "dev_per_user") for f in fses}
        line = "%-14s" % t + "".join("%9s" % fmt(d[f]) for f in fses)
        for f in fses:
            if f == "none":
                continue
            lim, x = med(rows, f, t, "limit_per_user"), med(rows, f, t, "ratio_limit")
            line += "%11s %9s" % (fmt(lim), fmt(x))
            flat.append((f, t + ":x_limit", x))
        for f in fses:
            if f != "none":
                r = d[f] / d["none"] if d.get("none") and d[f] is not None else None
                line += "%10s" % fmt(r)
                flat.append((f, t + ":dev_vs_none", r))
        for f in fses:
            flat.append((f, t + ":dev_per_user", d[f]))
        p(line)
    if any(r["test"] == "churn" for r in rows):
        p("")
        p("churn (75% logical fill, whole-file overwrites): effective WAF (device / user bytes) "
          "and classic WAF (device / device less GC moves)")
        p("%-14s" % "fs" + "%12s %12s %12s" % ("effective", "classic", "MiB/s"))
        for f in fses:
            e, c_, m = (med(rows, f, "churn", k) for k in ("dev_per_user", "waf_classic", "MiBps"))
            p("%-14s%12s %12s %12s" % (f, fmt(e), fmt(c_), fmt(m, "%.1f")))
            flat.append((f, "churn:waf_classic", c_))
    p("")
    p("throughput (MiB/s; randread: IOPS)")
    p("%-16s" % "test" + "".join("%9s" % f for f in fses) + "".join("%10s" % (f + "/none") for f in fses if f != "none"))
    for t in RATE_TESTS + ["store-tree"]:
        col = "iops" if t.startswith("randread") else "MiBps"
        d = {f: med(rows, f, t, col) for f in fses}
        if all(v is None for v in d.values()):
            continue
        line = "%-16s" % t + "".join("%9s" % fmt(d[f], "%.1f") for f in fses)
        for f in fses:
            if f != "none":
                r = d[f] / d["none"] if d.get("none") and d[f] is not None else None
                line += "%10s" % fmt(r, "%.2f")
                flat.append((f, t + ":vs_none", r))
        p(line)
    for t in ("rss-write", "rss-read"):
        if not any(r["test"] == t for r in rows):
            continue
        d = {f: med(rows, f, t, "rss_kib") for f in fses}
        p("")
        p("daemon peak RSS, %s mount (VmHWM, MiB): " % t[4:] + ", ".join(
            "%s %s" % (f, fmt(d[f] / 1024 if d[f] else None, "%.1f")) for f in fses))
        for f in fses:
            flat.append((f, t + ":mib", d[f] / 1024 if d[f] else None))
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["fs", "metric", "value"])
            for fs, m, v in flat:
                w.writerow([fs, m, "" if v is None else "%.4f" % v])


def plot(a):
    rows = load(a.csv)
    fses = [f for f in FSES if any(r["fs"] == f for r in rows)]
    tests = [t for t in ["store-" + c for c in CORPORA] + ["append-logs", "churn"] if any(r["test"] == t for r in rows)]
    dat = a.png + ".dat"
    with open(dat, "w") as f:
        f.write("test " + " ".join(fses) + " " + " ".join(x + "-limit" for x in fses if x != "none") + "\n")
        for t in tests:
            vals = [med(rows, x, t, "dev_per_user") for x in fses] + [
                med(rows, x, t, "limit_per_user") for x in fses if x != "none"]
            f.write(t + " " + " ".join("NaN" if v is None else "%.4f" % v for v in vals) + "\n")
    n = len(fses) + len([x for x in fses if x != "none"])
    script = ("set terminal pngcairo size 1100,500\nset output '%s'\nset style data histograms\n"
              "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
              "set key autotitle columnhead outside right\nset ylabel 'device bytes / user bytes (log scale)'\n"
              "set title 'zlfs compression: bytes that reach the device per user byte (limit: codec per cluster)'\n"
              "set logscale y\nset yrange [0.1:*]\nset grid ytics\nplot for [i=2:%d] '%s' using i:xtic(1)\n") % (a.png, n + 1, dat)
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.unlink(dat)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpora")
    c.add_argument("dir")
    c.add_argument("--tree-dirs", default="/usr/include,/usr/share/doc")
    for k, v in (("tree", 128), ("sqlite", 32), ("logs", 32), ("random", 64), ("text", 256)):
        c.add_argument("--%s-mb" % k, type=int, default=v)
    c = sub.add_parser("phase")
    c.add_argument("test")
    for k in ("csv", "round", "fs", "mnt", "ctl", "corpus", "outdir"):
        c.add_argument("--" + k, required=True)
    c.add_argument("--limit")
    c.add_argument("--runtime", type=int, default=10)
    c.add_argument("--append-mb", type=int, default=4)
    c = sub.add_parser("churn-row")
    for k in ("csv", "round", "fs", "json"):
        c.add_argument("--" + k, required=True)
    c = sub.add_parser("rss-row")
    for k in ("csv", "round", "fs", "pid", "test"):
        c.add_argument("--" + k, required=True)
    c = sub.add_parser("summary")
    c.add_argument("csv")
    c.add_argument("--out")
    c = sub.add_parser("plot")
    c.add_argument("csv")
    c.add_argument("png")
    a = ap.parse_args()
    {"corpora": corpora, "phase": phase, "churn-row": churn_row, "rss-row": rss_row, "summary": summary,
     "plot": plot}[a.cmd](a)


if __name__ == "__main__":
    main()
