"""tools/lib/devmodel.py - device time from the emulator's NAND model, for the workloads run
with --guest conv-model (zlfs on the zoned model, kernel F2FS or ext4 on the conventional
model of the same NAND and capacity): snapshots of the model's counters, the figures of one
phase from two of them, and the Zoned UFS study's numbers to put beside ours.

Snapshots come from zlfs-ctl stats ("device_model", zlfs on an emulated image) or from the
NBD server's control socket (zlfs-emu serve-nbd SOCKET.ctl, a serial port in the guest).
Both are the emulator's zemu_stats_json(): flat counters, subtracted key by key.
Standard library only.
"""
import glob
import json
import os
import subprocess

MiB = float(1 << 20)

# The study's figures (shared/seeds/zoned-ufs-study.txt), for the side-by-side tables.
PAPER = {
    "randrange": "similar at a 4 GB range (the map working set fits SRAM); conventional falls as "
                 "the range grows to 256 GB, zoned stays flat; the gap is largest below 128 KB",
    "age_write_floor": "conventional about 100 MB/s once F2FS's free segments run out (about "
                       "iteration 90); zoned above 200 MB/s, more than 2x",
    "age_read_drop": "conventional reads drop about 35% when foreground GC begins; zoned stable",
    "iv_time": "zoned 30 s against conventional 35 s: 14% less",
    "iv_sizes": "conventional: 66.3% of reads in 4-8 KB; zoned: most reads above 512 KB",
}


def control_port():
    """The guest's serial port to the NBD server's control socket (tools/zoned-vm --nbd)."""
    for name in sorted(glob.glob("/sys/class/virtio-ports/*/name")):
        with open(name) as f:
            if f.read().strip() == "zvm.nbd0.ctl":
                return "/dev/" + os.path.basename(os.path.dirname(name))
    return None


class Source:
    """Where snapshots come from: CTL+MNT (zlfs), or the control socket or serial port
    (a kernel filesystem on the NBD server). None of them: no device figures."""

    def __init__(self, ctl=None, mnt=None, control=None):
        self.ctl, self.mnt = ctl, mnt
        self.control = control_port() if control == "auto" else control
        if control == "auto" and not self.control:
            raise SystemExit("no serial port zvm.nbd0.ctl to the NBD server (tools/zoned-vm --nbd)")
        self.active = None  # zlfs: whether its device has a timing model, found at the first snap

    @classmethod
    def from_args(cls, a):
        return cls(getattr(a, "ctl", None), getattr(a, "mnt", None), getattr(a, "dev_control", None))

    def _ctl_model(self):
        out = subprocess.run([self.ctl, "stats", self.mnt], capture_output=True, text=True,
                             check=True).stdout
        d = json.loads(out).get("device_model")
        return d if d and d.get("dies") else None

    def _ask(self):
        """One "stats" line from the server: a socket path on the host, a port in the guest."""
        if self.control.startswith("/dev/"):
            with open(self.control, "r+b", buffering=0) as f:
                f.write(b"stats\n")
                line = b""
                while not line.endswith(b"\n"):
                    c = f.read(4096)
                    if not c:
                        break
                    line += c
        else:
            import socket
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.control)
                s.sendall(b"stats\n")
                line = s.makefile("rb").readline()
        return json.loads(line)

    def snap(self, sync=False):
        """The model's counters now; SYNC first writes back what the filesystem still holds,
        so that a phase starts with the device idle and holding everything before it."""
        if self.control:
            if sync:
                os.sync()
            return self._ask()
        if self.ctl and self.active is not False:
            if self.active is None:  # a zlfs without a model is left as it ran before
                self.active = self._ctl_model() is not None
            if self.active and sync:
                subprocess.run([self.ctl, "sync", self.mnt], check=True, capture_output=True)
            return self._ctl_model() if self.active else None
        return None


def delta(a, b):
    """B - A for every counter (the geometry and options too: they stay, so 0)."""
    if not a or not b:
        return None
    return {k: b[k] - a[k] for k in b if k in a and isinstance(b[k], (int, float))
            and not isinstance(b[k], bool)}


def sim_s(d):
    return d["sim_ns"] / 1e9 if d and d.get("sim_ns", 0) > 0 else None


def mibps(nbytes, d):
    """NBYTES moved in the device time of D (MiB per simulated second)."""
    s = sim_s(d)
    return nbytes / MiB / s if s else None


def waf(d, unit):
    return d["programs"] * unit / d["host_write_bytes"] if d and d.get("host_write_bytes") else None


def miss_pct(d):
    return 100.0 * d["map_misses"] / d["map_lookups"] if d and d.get("map_lookups") else None


def iops(d):
    s = sim_s(d)
    return d["host_reads"] / s if s and d.get("host_reads") else None


def read_us(d):
    return d["read_service_ns"] / d["host_reads"] / 1e3 if d and d.get("host_reads") else None


def cover_bytes(snap):
    """The addresses the map cache covers: 1024 entries of 4 KiB per cached map page (0 in
    zoned mode, whose map is all resident)."""
    if not snap or snap.get("mode") != "conventional":
        return 0
    return snap.get("map_cache_pages", 0) * 1024 * 4096


def fmt(v, nd=1):
    return "-" if v is None or v == "" else "%.*f" % (nd, v)


def cell(v, nd=2):
    """A CSV cell: empty when there is no figure."""
    return "" if v is None else "%.*f" % (nd, v)


def save(path, snap):
    with open(path, "w") as f:
        json.dump(snap, f)


def load(path):
    if not path or not os.path.exists(path) or not os.path.getsize(path):
        return None
    with open(path) as f:
        v = json.load(f)
    return v or None


# ---- the summaries, mode against mode ---------------------------------------------------------
def num(row, key):
    v = row.get(key, "")
    return float(v) if v not in ("", None) else None


def has_dev(rows, key):
    """Whether every row of the run carries the device figure KEY."""
    return bool(rows) and all(num(r, key) is not None for r in rows)


def age_summary(by, first, window, stats_fn, out):
    """The aging figures in device time, each filesystem, then the ratios against zlfs and
    the study's. BY: rows per filesystem in iteration order; STATS_FN: workloads.age_stats."""
    runs = {fs: rs for fs, rs in by.items() if has_dev(rs, "dev_write_MiBps")}
    if not runs:
        return
    print("Device time on the emulator's NAND model (simulated MiB/s; zlfs: zoned mode, the others:"
          " the conventional mode's FTL):")
    print("  %-16s %6s %10s %10s %6s %9s %10s %10s %8s %8s %9s %8s" % (
        "fs", "iters", "write0", "wfloor", "@iter", "wfloor~%d" % window, "read0", "read min",
        "drop%", "drop%end", "devGC@it", "WAF end"))
    st = {}
    for fs, rs in runs.items():
        s = st[fs] = stats_fn(rs, first, window, "dev_write_MiBps", "dev_read_MiBps")
        gc_at = next((int(r["iter"]) for r in rs if (num(r, "dev_gc_pages") or 0) > 0), None)
        s["dev_gc_began"] = gc_at
        print("  %-16s %6d %10.1f %10.1f %6d %9.1f %10.1f %10.1f %8.1f %8.1f %9s %8s" % (
            fs, s["iterations"], s["write_first_MiBps"], s["write_floor_MiBps"], s["write_floor_iter"],
            s["write_floor_med_MiBps"], s["read_first_MiBps"], s["read_min_MiBps"], s["read_drop_pct"],
            s["read_drop_last_pct"], gc_at if gc_at else "-", fmt(num(rs[-1], "dev_waf"), 2)))
        for m in ("write_first_MiBps", "write_floor_MiBps", "write_floor_med_MiBps", "read_first_MiBps",
                  "read_min_MiBps", "read_drop_pct", "read_drop_last_pct"):
            out.append((fs, "dev_" + m, s[m], "%" if m.endswith("pct") else "MiB/s"))
        if gc_at:
            out.append((fs, "dev_gc_began_iter", gc_at, "iter"))
        if num(rs[-1], "dev_waf") is not None:
            out.append((fs, "dev_waf_last", num(rs[-1], "dev_waf"), "x"))
    for fs in st:
        if fs == "zlfs" or "zlfs" not in st:
            continue
        z, o = st["zlfs"], st[fs]
        for m, label in (("write_floor_med_MiBps", "write floor (median of %d)" % window),
                         ("write_floor_MiBps", "write floor")):
            if o[m] > 0:
                out.append(("zlfs/" + fs, "dev_ratio_" + m, z[m] / o[m], "x"))
                print("  device time: zlfs/%s %-28s %.2fx (the study: zoned/conventional > 2x)" % (
                    fs, label, z[m] / o[m]))
        print("  device time: read drop zlfs %.1f%%, %s %.1f%% (the study: conventional ~35%%, zoned stable)" % (
            z["read_drop_pct"], fs, o["read_drop_pct"]))
    print("  the study: write floor: %s; reads: %s" % (PAPER["age_write_floor"], PAPER["age_read_drop"]))


RR_DEV_KNEE_PCT = 20.0  # a range whose reads miss more often than this is past the knee
# (a range as large as the cache's cover touches one map page more than it holds: ~11% there)


def predicted_miss_pct(rng, cover):
    """A random page of RANGE bytes, an LRU cache of COVER bytes of map: the share of lookups
    that miss, once the cache is warm (the range touches one map page more than it spans,
    being rarely aligned to 4 MiB)."""
    if not cover:
        return 0.0
    pages = rng / (4 << 20) + 1
    return max(0.0, 100.0 * (1 - (cover / (4 << 20)) / pages))


def rr_summary(by, fsize, out):
    """Device IOPS and map misses by range, the knee against the cache's cover, zlfs against
    each. BY: {(fs, job): {range: row}}."""
    runs = {k: v for k, v in by.items() if has_dev(list(v.values()), "dev_iops")}
    if not runs:
        return
    print("Device time on the emulator's NAND model (simulated IOPS; map misses %; the model's"
          " prediction from the cache's cover in brackets):")
    for (fs, job), rs in sorted(runs.items()):
        ks = sorted(rs)
        lo, hi = num(rs[ks[0]], "dev_iops"), num(rs[ks[-1]], "dev_iops")
        cover = max(num(rs[k], "dev_cover_bytes") or 0 for k in ks)
        drop = 100.0 * (1 - hi / lo) if lo else 0.0
        print("  %-16s %-7s IOPS %s; drop %.1f%%; mean latency us %s" % (
            fs, job, " ".join("%s:%.0f" % (fsize(k), num(rs[k], "dev_iops")) for k in ks), drop,
            " ".join("%s:%.0f" % (fsize(k), num(rs[k], "dev_read_us")) for k in ks)))
        print("  %-16s %-7s misses %s" % ("", "", " ".join("%s:%.0f(%.0f)" % (
            fsize(k), num(rs[k], "dev_map_miss_pct"), predicted_miss_pct(k, cover)) for k in ks)))
        out += [(fs, job, "dev_iops_smallest_range", lo), (fs, job, "dev_iops_largest_range", hi),
                (fs, job, "dev_iops_drop_pct", drop)]
        if cover:
            knee = next((k for k in ks if num(rs[k], "dev_map_miss_pct") > RR_DEV_KNEE_PCT), None)
            below = [k for k in ks if k <= cover]
            agree = knee is not None and knee > cover and (not below or knee == min(k for k in ks if k > cover))
            print("  %-16s %-7s knee (first range missing > %.0f%%): %s; the cache covers %s: %s" % (
                "", "", RR_DEV_KNEE_PCT, fsize(knee) if knee else "none", fsize(cover),
                "the knee is the first range beyond it" if agree else "they DISAGREE"))
            out += [(fs, job, "dev_knee_bytes", knee or 0), (fs, job, "dev_cover_bytes", cover),
                    (fs, job, "dev_knee_agrees", int(agree))]
    for (fs, job), rs in sorted(runs.items()):
        z = runs.get(("zlfs", job))
        if fs == "zlfs" or not z:
            continue
        common = sorted(set(z) & set(rs))
        rat = [(k, num(z[k], "dev_iops") / num(rs[k], "dev_iops")) for k in common if num(rs[k], "dev_iops")]
        print("  device time: zlfs/%s %s IOPS by range: %s" % (fs, job, " ".join("%s:%.2f" % (fsize(k), v) for k, v in rat)))
        for k, v in rat:
            out.append(("zlfs/" + fs, job, "dev_ratio_iops_%dM" % (k >> 20), v))
    print("  the study: " + PAPER["randrange"])


def iv_summary(rows, out):
    """Verification in device time, the read sizes from the device's own counters, zlfs
    against each, and the study's."""
    runs = [r for r in rows if num(r, "dev_verify_s") is not None]
    if not runs:
        return
    print("Device time on the emulator's NAND model (simulated; QD1: its reads one at a time):")
    for r in runs:
        n = [num(r, "reads_" + b) or 0 for b in ("4k_8k", "ge_512k")]
        tot = sum(num(r, k) or 0 for k in r if k.startswith("reads_"))
        print("  %-16s install %.3f s, verify %.3f s (%.1f MiB/s), at QD1 %s s; %s MiB read; reads "
              "4-8K %.1f%%, >=512K %.1f%%" % (
                  r["fs"], num(r, "dev_install_s") or 0, num(r, "dev_verify_s"),
                  num(r, "dev_verify_MiBps") or 0, fmt(num(r, "dev_verify_qd1_s"), 3),
                  fmt((num(r, "dev_read_bytes") or 0) / MiB), 100.0 * n[0] / tot if tot else 0,
                  100.0 * n[1] / tot if tot else 0))
        out += [(r["fs"], "dev_verify_s", num(r, "dev_verify_s"), "s"),
                (r["fs"], "dev_install_s", num(r, "dev_install_s"), "s")]
        if num(r, "dev_verify_qd1_s") is not None:
            out.append((r["fs"], "dev_verify_qd1_s", num(r, "dev_verify_qd1_s"), "s"))
    by = {r["fs"]: r for r in runs}
    for fs in by:
        if fs == "zlfs" or "zlfs" not in by:
            continue
        for key, what in (("dev_verify_s", "verify"), ("dev_verify_qd1_s", "verify at QD1")):
            z, o = num(by["zlfs"], key), num(by[fs], key)
            if z and o:
                out.append(("zlfs/" + fs, key.replace("_s", "") + "_time_cut_pct", 100.0 * (1 - z / o), "%"))
                print("  device time: %s on zlfs takes %.1f%% %s than on %s (the study: 14%% less)" % (
                    what, abs(100.0 * (1 - z / o)), "less" if z < o else "more", fs))
    print("  the study: %s; %s" % (PAPER["iv_time"], PAPER["iv_sizes"]))
