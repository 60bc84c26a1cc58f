#!/usr/bin/env python3
"""tools/lib/scale.py - the timed steps of tools/bench-scale (run, not imported).

  scale.py create ROOT FIRST LAST PERDIR    create empty files FIRST..LAST-1: ROOT/dK/fN with
                                            K = N // PERDIR, or ROOT/fN when PERDIR is 0;
                                            prints the seconds taken
  scale.py stat ROOT LAST PERDIR COUNT SEED stat COUNT files drawn from 0..LAST-1; seconds
  scale.py mount MNT TIMEOUT CMD...         start CMD (a daemon in the foreground), wait for
                                            MNT in /proc/self/mountinfo; prints "SECONDS PID"
  scale.py rss PID                          the daemon's VmRSS and VmHWM in KiB: "RSS HWM"
  scale.py summary CSV                      the table of a bench-scale CSV, with the targets

Files are created with open(O_CREAT|O_EXCL) and closed: one create and one release per file,
as a file-creating workload does; nothing is written to them.
"""
import csv
import os
import random
import subprocess
import sys
import time


def path_of(root, n, perdir):
    if perdir:
        return f"{root}/d{n // perdir}/f{n}"
    return f"{root}/f{n}"


def cmd_create(root, first, last, perdir):
    first, last, perdir = int(first), int(last), int(perdir)
    t0 = time.monotonic()
    for n in range(first, last):
        if perdir and (n % perdir == 0 or n == first):
            os.makedirs(f"{root}/d{n // perdir}", exist_ok=True)
        fd = os.open(path_of(root, n, perdir), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
    print(f"{time.monotonic() - t0:.6f}")


def cmd_stat(root, last, perdir, count, seed):
    last, perdir, count = int(last), int(perdir), int(count)
    rng = random.Random(int(seed))
    picks = rng.sample(range(last), min(count, last))  # distinct: no stat hits a warm entry
    t0 = time.monotonic()
    for n in picks:
        os.stat(path_of(root, n, perdir))
    print(f"{time.monotonic() - t0:.6f}")


def mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


def cmd_mount(mnt, timeout, *cmd):
    mnt = os.path.realpath(mnt)
    t0 = time.monotonic()
    p = subprocess.Popen(list(cmd), start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL)  # the caller reads our stdout to its end
    while not mounted(mnt):
        if p.poll() is not None:
            sys.exit(f"scale.py: {cmd[0]} exited with {p.returncode} before mounting {mnt}")
        if time.monotonic() - t0 > float(timeout):
            sys.exit(f"scale.py: {mnt} not mounted after {timeout} s")
        time.sleep(0.002)
    print(f"{time.monotonic() - t0:.6f} {p.pid}")


def cmd_rss(pid):
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                got[k] = v.split()[0]
    print(got.get("VmRSS", "0"), got.get("VmHWM", "0"))


# The targets, judged only where they apply (4 TiB and 1M files; the ratios at 1M
# files): metric -> (label, target description, test(value, image bytes, files) or None)
BIG = 4 << 40
MILLION = 1000000
TARGETS = {
    "rss_mib_full": ("daemon RSS, all files created", "<= 128 MiB at 4 TiB / 1M files",
                     lambda v, size, n: v <= 128 if size >= BIG and n >= MILLION else None),
    "mount_clean_s": ("clean mount", "<= 1 s at 4 TiB / 1M files",
                      lambda v, size, n: v <= 1 if size >= BIG and n >= MILLION else None),
    "mount_powercut_s": ("mount after kill -9 and a power cut", "<= 3 s at 4 TiB / 1M files",
                         lambda v, size, n: v <= 3 if size >= BIG and n >= MILLION else None),
    "tree_create_ratio": ("tree create rate, all files / first window", ">= 0.8 at 1M files",
                          lambda v, size, n: v >= 0.8 if n >= MILLION else None),
    "tree_stat_ratio": ("tree stat rate, all files / first window", ">= 0.8 at 1M files",
                        lambda v, size, n: v >= 0.8 if n >= MILLION else None),
}


def cmd_summary(path):
    rows = list(csv.DictReader(open(path)))
    sizes = []
    for r in rows:
        if r["image"] not in sizes:
            sizes.append(r["image"])
    val = {(r["image"], r["metric"]): r for r in rows}
    metrics = []
    for r in rows:
        if r["metric"] not in metrics:
            metrics.append(r["metric"])
    print("| metric | unit | " + " | ".join(sizes) + " | target |")
    print("|---|---|" + "---|" * len(sizes) + "---|")
    verdicts = []
    for m in metrics:
        cells, unit = [], ""
        for s in sizes:
            r = val.get((s, m))
            cells.append(r["value"] if r else "-")
            unit = r["unit"] if r else unit
            t = TARGETS.get(m)
            files = val.get((s, "files"))
            if r and t and r["value"] not in ("", "nan"):
                ok = t[2](float(r["value"]), int(r["image_bytes"]),
                          int(files["value"]) if files else 0)
                if ok is not None:
                    verdicts.append(f"{s} {t[0]}: {r['value']} {unit} "
                                    f"({'met' if ok else 'NOT met'}: {t[1]})")
        target = TARGETS[m][1] if m in TARGETS else ""
        print(f"| {m} | {unit} | " + " | ".join(cells) + f" | {target} |")
    print()
    for v in verdicts:
        print(v)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmds = {"create": cmd_create, "stat": cmd_stat, "mount": cmd_mount, "rss": cmd_rss,
            "summary": cmd_summary}
    fn = cmds.get(sys.argv[1])
    if not fn:
        sys.exit(__doc__)
    fn(*sys.argv[2:])


if __name__ == "__main__":
    main()
