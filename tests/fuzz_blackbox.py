#!/usr/bin/env python3
"""tests/fuzz_blackbox.py - the black-box fuzzing mode: mutated whole images through the real
binaries of a sanitizer build (docs/fsck.md, "Fuzzing").

Each image (a seed of tests/fuzz-seeds, mutated by fuzz_mutate: raw bytes anywhere, or fields
resealed with their checksums) goes through
  1. fsck.zlfs -n                       (on copy A)
  2. the zlfs daemon, mounted read-write on copy B, walked as a user would: ls -laR, cat,
     readlink, getfattr, a write + fsync, a rename, a mkdir, an unlink; then unmounted, and
     the daemon must exit
  3. fsck.zlfs -y on A, then fsck.zlfs -n on A again.
A failure is: a sanitizer report (ASan, UBSan, LSan) whatever the exit code; an exit code
fsck(8) does not define, or a signal; anything that takes over 30 s (a hang), including a
daemon that does not exit after its unmount; and two invariants:
  - after fsck -y exits 0 or 1, a second fsck -n exits 0;
  - an image fsck -n calls clean mounts, lists, reads and writes with no error, and fsck -n
    still calls it clean after that use.
Failures are grouped by signature (the sanitizer's error and the first project frame, or the
invariant and stage); the first image of each is kept with its logs.

  fuzz_blackbox.py run --bin DIR --mutator PATH [--seeds DIR] [--iters N | --minutes M]
                       [--seed S] --work DIR [--keep DIR] [--stats FILE] [--corpus DIR]
      --corpus: also mutate the images kept there, and keep there mutated images fsck -n
      still calls clean (up to 300)
  fuzz_blackbox.py replay --bin DIR --findings DIR --work DIR   every kept finding (not
                       pending/) through the checks: exit 1 if any fails
  fuzz_blackbox.py check --bin DIR --work DIR IMAGE [--key FILE]   one image, report printed
  fuzz_blackbox.py minimize --bin DIR --work DIR --orig SEED_IMAGE IMAGE [--key FILE]
                       put back whole blocks of IMAGE from SEED_IMAGE while the first
                       failure's signature stays; writes IMAGE.min
  fuzz_blackbox.py walk MOUNTPOINT    (internal) the user's walk, errors as JSON on stdout
Exit: 0 no failure, 1 failures, 2 usage, 77 skipped (no FUSE, or no binaries).
"""
import argparse
import errno
import glob
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HANG = 30           # seconds: anything longer is a hang
MOUNT_WAIT = 20     # seconds for the daemon to mount or give up
FSCK_CODES = {0, 1, 2, 4, 8}
SAN_CODES = {66, 67}  # ASAN_OPTIONS / UBSAN_OPTIONS exitcode below: the report says more
HERE = os.path.dirname(os.path.abspath(__file__))
SAN_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|"
                    r"SUMMARY: UndefinedBehaviorSanitizer|ERROR: ThreadSanitizer")
PROJECT_DIRS = ("/fs/", "/fsck/", "/mkfs/", "/crypto/", "/tools/")


# ---- the user's walk (runs in its own process, under a timeout) -----------------------------

def walk(mnt):
    """ls -laR, cat, readlink, getfattr over MNT, then a few changes. Prints the errors."""
    errs = []

    def err(op, path, e):
        errs.append([op, os.path.relpath(path, mnt), errno.errorcode.get(e.errno, str(e.errno))])

    files, dirs, nread = [], [], 0
    stack = [mnt]
    while stack and len(dirs) < 300:
        d = stack.pop()
        dirs.append(d)
        try:
            names = sorted(os.listdir(d))
            os.path.lexists(os.path.join(d, "fz-absent"))  # a lookup that finds nothing
        except OSError as e:
            err("readdir", d, e)
            continue
        for n in names[:400]:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError as e:
                err("lstat", p, e)
                continue
            try:
                for a in os.listxattr(p, follow_symlinks=False):
                    os.getxattr(p, a, follow_symlinks=False)
            except OSError as e:
                if e.errno not in (errno.ENOTSUP, errno.ENODATA):
                    err("xattr", p, e)
            mode = st.st_mode >> 12
            if mode == 0o04:
                stack.append(p)
            elif mode == 0o12:
                try:
                    os.readlink(p)
                except OSError as e:
                    err("readlink", p, e)
            elif mode == 0o10:
                files.append(p)
                if nread < 200:
                    nread += 1
                    try:
                        with open(p, "rb") as f:
                            f.read(1 << 20)
                    except OSError as e:
                        err("read", p, e)
    # changes: a new file written and fsync'ed, a rename, a mkdir, an append, an xattr, an unlink
    steps = [
        ("create", lambda: _write(os.path.join(mnt, "fz-new"), b"z" * 65536, fsync=True)),
        ("mkdir", lambda: os.mkdir(os.path.join(mnt, "fz-dir"))),
        ("rename", lambda: os.rename(os.path.join(mnt, "fz-new"),
                                     os.path.join(mnt, "fz-dir", "moved"))),
        ("symlink", lambda: os.symlink("fz-dir/moved", os.path.join(mnt, "fz-link"))),
    ]
    if files:
        steps += [
            ("append", lambda: _write(files[0], b"a" * 8192, fsync=True, mode="ab")),
            ("setxattr", lambda: os.setxattr(files[0], "user.fz", b"v" * 64)),
            ("rename-old", lambda: os.rename(files[-1], os.path.join(mnt, "fz-renamed"))),
        ]
    if len(files) > 2:
        steps.append(("unlink", lambda: os.unlink(files[1])))
    needs = {"rename": ("create", "mkdir")}  # a step after a failed one it needs is skipped
    failed = set()
    for name, fn in steps:
        if any(n in failed for n in needs.get(name, ())):
            continue
        try:
            fn()
        except OSError as e:
            failed.add(name)
            err(name, mnt, e)
    print(json.dumps({"errors": errs, "files": len(files), "dirs": len(dirs)}))


def _write(path, data, fsync=False, mode="wb"):
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


# ---- running one image ----------------------------------------------------------------------

class Runner:
    def __init__(self, bindir, work):
        self.bin = bindir
        self.work = os.path.abspath(work)
        self.san = os.path.join(self.work, "san")
        os.makedirs(self.san, exist_ok=True)
        self.env = dict(os.environ)
        self.env["ASAN_OPTIONS"] = ("exitcode=66:detect_leaks=1:abort_on_error=0:"
                                    "log_path=%s/asan" % self.san)
        self.env["UBSAN_OPTIONS"] = ("halt_on_error=1:print_stacktrace=1:exitcode=67:"
                                     "log_path=%s/ubsan" % self.san)

    def _san_logs(self):
        """Sanitizer reports written since the last call (the files are then removed)."""
        out = []
        for p in sorted(glob.glob(os.path.join(self.san, "*"))):
            try:
                with open(p, errors="replace") as f:
                    out.append(f.read())
            finally:
                os.unlink(p)
        return out

    def _run(self, stage, argv, fails, log):
        """Run ARGV with a timeout; record sanitizer reports, hangs, odd exits. rc or None."""
        try:
            p = subprocess.run(argv, env=self.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=HANG)
            out, rc = p.stdout.decode(errors="replace"), p.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode(errors="replace"), None
            fails.append(("hang:" + stage, "%s ran over %d s" % (" ".join(argv), HANG)))
        log.append("$ %s\n%s[exit %s]\n" % (" ".join(argv), out[-4000:], rc))
        self.reported = self._sanitized(stage, out, fails)
        return rc

    def _sanitized(self, stage, out, fails):
        reports = self._san_logs()
        if SAN_RE.search(out):
            reports.append(out)
        for r in reports:
            fails.append((signature(r, stage), r))
        return len(reports)

    def fsck(self, stage, img, args, key, fails, log):
        argv = [os.path.join(self.bin, "fsck.zlfs")] + args
        if key:
            argv += ["--keyfile", key]
        rc = self._run(stage, argv + [img], fails, log)
        if rc is not None and rc not in FSCK_CODES and not (rc in SAN_CODES and self.reported):
            fails.append(("exit:%s:%d" % (stage, rc), "%s exited %d" % (stage, rc)))
        return rc

    def mount_walk(self, img, key, fails, log):
        """Mount IMG read-write, walk it, unmount; the daemon must exit. Walk result or None."""
        mnt = os.path.join(self.work, "mnt")
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        os.makedirs(mnt, exist_ok=True)
        argv = [os.path.join(self.bin, "zlfs"), "-f", "-o", "cp_interval=1"]
        if key:
            argv += ["-o", "keyfile=" + key]
        dlog = open(os.path.join(self.work, "daemon.log"), "w+b")
        d = subprocess.Popen(argv + [img, mnt], env=self.env, stdout=dlog,
                             stderr=subprocess.STDOUT)
        result, t0 = None, time.time()
        while time.time() - t0 < MOUNT_WAIT and d.poll() is None and mount_opts(mnt) is None:
            time.sleep(0.02)
        opts = mount_opts(mnt)
        if opts is not None:
            result = self._walk(mnt, fails, log)
            self._unmount(d, mnt, fails, log)
        elif d.poll() is None:
            fails.append(("hang:mount", "the daemon neither mounted nor exited in %d s"
                          % MOUNT_WAIT))
            self._stop(d, mnt, log)
        dlog.seek(0)
        out = dlog.read().decode(errors="replace")
        dlog.close()
        if result is not None:  # the daemon chose to mount read-only, and said why
            result["ro"] = "ro" in opts.split(",") or "mounting read-only" in out
        log.append("$ %s\n%s[exit %s]\n" % (" ".join(argv + [img, mnt]), out[-4000:], d.returncode))
        reported = self._sanitized("daemon", out, fails)
        if d.returncode is not None and d.returncode not in (0, 1) and \
                not (d.returncode in SAN_CODES and reported):
            fails.append(("exit:daemon:%d" % d.returncode, "daemon exited %d" % d.returncode))
        return result, d.returncode

    def _walk(self, mnt, fails, log):
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "walk", mnt],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=HANG)
            log.append("$ walk %s\n%s%s" % (mnt, p.stdout.decode()[-3000:],
                                           p.stderr.decode()[-2000:]))
            return json.loads(p.stdout.decode() or "null")
        except subprocess.TimeoutExpired:
            fails.append(("hang:walk", "ls/cat/write on the mount ran over %d s" % HANG))
            return None
        except ValueError:
            fails.append(("walk:crashed", "the walk printed no result"))
            return None

    def _stop(self, d, mnt, log):
        gdb = shutil.which("gdb")
        if gdb and d.poll() is None: # where it hangs, for the finding
            try:
                p = subprocess.run([gdb, "-batch", "-p", str(d.pid), "-ex",
                                    "thread apply all bt 12"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=60)
                log.append("$ gdb backtrace of the hung daemon\n" +
                           p.stdout.decode(errors="replace")[-12000:])
            except subprocess.TimeoutExpired:
                pass
        d.kill()
        d.wait()
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)

    def _unmount(self, d, mnt, fails, log):
        try:
            p = subprocess.run(["fusermount3", "-u", mnt], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=HANG)
            if p.returncode:
                log.append("fusermount3 -u: %s" % p.stdout.decode(errors="replace"))
                subprocess.run(["fusermount3", "-u", "-z", mnt], timeout=HANG)
        except subprocess.TimeoutExpired:
            fails.append(("hang:unmount", "fusermount3 -u ran over %d s" % HANG))
            subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        try:
            d.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            fails.append(("hang:daemon-exit", "the daemon did not exit within %d s of its "
                          "unmount" % HANG))
            self._stop(d, mnt, log)

    def check(self, img, key=None, name="img"):
        """All the checks on IMG (left untouched). Returns (failures, info, log)."""
        fails, log, info = [], [], {}
        a = os.path.join(self.work, name + ".a")
        b = os.path.join(self.work, name + ".b")
        sparse_copy(img, a)
        sparse_copy(img, b)
        info["n1"] = self.fsck("fsck-n", a, ["-n"], key, fails, log)
        walked, info["daemon"] = self.mount_walk(b, key, fails, log)
        info["walk"] = walked
        if info["n1"] == 0:
            self._clean_invariants(b, key, walked, info, fails, log)
        info["y"] = self.fsck("fsck-y", a, ["-y"], key, fails, log)
        if info["y"] in (0, 1):
            info["n2"] = self.fsck("fsck-n2", a, ["-n"], key, fails, log)
            if info["n2"] not in (0, None):
                fails.append(("inv:fsck-y-then-n-dirty", "fsck -y exited %d, then fsck -n %d"
                              % (info["y"], info["n2"])))
        for p in (a, b):
            os.unlink(p)
        return dedup(fails), info, log

    def _clean_invariants(self, b, key, walked, info, fails, log):
        """fsck -n called the image clean: the daemon must use it without errors."""
        if info["daemon"] is None:
            return  # a hang, already recorded
        if walked is None and not any(f[0].startswith("hang") for f in fails):
            fails.append(("inv:clean-not-mounted", "fsck -n calls it clean, the daemon "
                          "did not mount it (exit %s)" % info["daemon"]))
            return
        crashed = any(f[0].startswith("san:") for f in fails)  # errors that follow from it
        if walked and not crashed:
            ok = ("ENOSPC", "EDQUOT") + (("EROFS",) if walked.get("ro") else ())
            bad = [e for e in walked["errors"] if e[2] not in ok]  # read-only by choice
            if bad:
                fails.append(("inv:clean-walk-error:%s:%s" % (bad[0][0], bad[0][2]),
                              "fsck -n calls it clean; the walk met %s" % bad[:5]))
        info["n_after"] = self.fsck("fsck-n-after-use", b, ["-n"], key, fails, log)
        if info["n_after"] not in (0, None):
            fails.append(("inv:clean-dirty-after-use", "fsck -n called it clean, and %d after "
                          "the daemon used it" % info["n_after"]))


def mount_opts(mnt):
    """The options MNT is mounted with, or None: from the mount table, since a stat of a
    mount whose root inode is damaged fails (os.path.ismount would say no)."""
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                p = line.split()
                if len(p) > 3 and p[1] == mnt:
                    return p[3]
    except OSError:
        pass
    return None


def dedup(fails):
    seen, out = set(), []
    for sig, text in fails:
        if sig not in seen:
            seen.add(sig)
            out.append((sig, text))
    return out


def signature(report, stage):
    """The sanitizer's error kind and the first frame in the project's code."""
    m = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", report)
    kind = m.group(1) if m else None
    if not kind and "LeakSanitizer" in report:
        kind = "leak"
    if not kind:
        m = re.search(r"runtime error: ([a-z]+(?: [a-z]+){0,2})", report)
        kind = "ubsan-" + (m.group(1).replace(" ", "-") if m else "error")
    frame = None
    for m in re.finditer(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)", report):
        if any(d in m.group(2) for d in PROJECT_DIRS):
            frame = "%s@%s" % (m.group(1), os.path.basename(m.group(2)))
            break
    if not frame:
        m = re.search(r"(\S+\.c):(\d+):\d+: runtime error", report)
        frame = os.path.basename(m.group(1)) if m else "unknown"
    return "san:%s:%s" % (kind, frame)


def sparse_copy(src, dst):
    subprocess.run(["cp", "--sparse=always", src, dst], check=True)


def slug(sig):
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", sig)[:80] + "-" + \
        hashlib.sha1(sig.encode()).hexdigest()[:6]


def load_seeds(seeds_dir, work):
    """Decompress the seed images once. Returns [(path, keyfile or None)]."""
    out = []
    dst = os.path.join(work, "seeds")
    os.makedirs(dst, exist_ok=True)
    key = os.path.join(seeds_dir, "master.key")
    for xz in sorted(glob.glob(os.path.join(seeds_dir, "*.img.xz"))):
        img = os.path.join(dst, os.path.basename(xz)[:-3])
        if not os.path.exists(img):
            with lzma.open(xz) as f, open(img + ".tmp", "wb") as o:
                shutil.copyfileobj(f, o)
            subprocess.run(["cp", "--sparse=always", img + ".tmp", img], check=True)
            os.unlink(img + ".tmp")
        enc = os.path.basename(img).startswith("enc")
        out.append((img, key if enc else None))
    return out


CORPUS_MAX = 300


def load_corpus(corpus, work, seeds_dir):
    out = []
    dst = os.path.join(work, "corpus")
    os.makedirs(dst, exist_ok=True)
    for xz in sorted(glob.glob(os.path.join(corpus, "*.img.xz")))[:CORPUS_MAX]:
        img = os.path.join(dst, os.path.basename(xz)[:-3])
        if not os.path.exists(img):
            with lzma.open(xz) as f, open(img + ".tmp", "wb") as o:
                shutil.copyfileobj(f, o)
            sparse_copy(img + ".tmp", img)
            os.unlink(img + ".tmp")
        enc = ".enc." in os.path.basename(img)
        out.append((img, os.path.join(seeds_dir, "master.key") if enc else None))
    return out


def grow_corpus(corpus, img, key, seed):
    """Keep a mutated image fsck -n calls clean: damage that passes is where more may hide."""
    if len(glob.glob(os.path.join(corpus, "*.img.xz"))) >= CORPUS_MAX:
        return
    name = "m%d%s.img.xz" % (seed, ".enc" if key else "")
    with open(img, "rb") as f, lzma.open(os.path.join(corpus, name), "wb") as o:
        shutil.copyfileobj(f, o)


def keep(keepdir, sig, text, img, key, seed_img, muts, log, info):
    """The first image of each signature, with its logs; later ones only counted."""
    d = os.path.join(keepdir, slug(sig))
    if os.path.exists(d):
        with open(os.path.join(d, "count"), "a") as f:
            f.write(".")
        return False
    os.makedirs(d)
    with open(img, "rb") as f, lzma.open(os.path.join(d, "image.img.xz"), "wb") as o:
        shutil.copyfileobj(f, o)
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write("signature: %s\nseed image: %s\nkey: %s\nmutations:\n%s\n\n%s\n\n"
                "---- log ----\n%s\n" % (sig, seed_img, key or "-", muts, text,
                                         "\n".join(log)))
    with open(os.path.join(d, "info.json"), "w") as f:
        json.dump({"signature": sig, "seed": os.path.basename(seed_img),
                   "encrypted": bool(key), "info": {k: v for k, v in info.items()
                                                    if k != "walk"}}, f, indent=1)
    open(os.path.join(d, "count"), "w").write(".")
    if key:  # replayed with the seeds' key (tests/fuzz-seeds/master.key)
        open(os.path.join(d, "encrypted"), "w").write(os.path.basename(key) + "\n")
    return True


def tools_ok(bindir):
    if not shutil.which("fusermount3") or not os.path.exists("/dev/fuse"):
        print("fuzz_blackbox: no FUSE here: skipped")
        return False
    for b in ("zlfs", "fsck.zlfs"):
        if not os.access(os.path.join(bindir, b), os.X_OK):
            print("fuzz_blackbox: %s/%s missing: skipped" % (bindir, b))
            return False
    return True


# ---- modes ----------------------------------------------------------------------------------

def cmd_run(a):
    if not tools_ok(a.bin):
        return 77
    os.makedirs(a.work, exist_ok=True)
    r = Runner(a.bin, a.work)
    seeds = load_seeds(a.seeds, a.work)
    if a.corpus:  # kept from earlier runs: mutated images fsck -n still called clean
        os.makedirs(a.corpus, exist_ok=True)
        seeds += load_corpus(a.corpus, a.work, a.seeds)
    keepdir = a.keep or os.path.join(a.work, "crashes")
    os.makedirs(keepdir, exist_ok=True)
    stats = {"inputs": 0, "failures": 0, "hangs": 0, "signatures": {}, "clean_n1": 0}
    t0, i = time.time(), 0
    mut = os.path.join(r.work, "mut.img")
    while True:
        if a.iters and i >= a.iters:
            break
        if a.minutes and time.time() - t0 > a.minutes * 60:
            break
        seed = a.seed * 1000003 + i
        img, key = seeds[seed % len(seeds)]
        args = [a.mutator, "mutate", img, mut, str(seed)]
        if (seed // len(seeds)) % 3 == 0:  # a third of the images raw and torn too
            args += ["0"]
        else:
            args += ["0", "--seal"]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        muts = p.stdout.decode(errors="replace")
        if p.returncode:
            print("fuzz_blackbox: mutator failed on %s: %s" % (img, muts), file=sys.stderr)
            return 1
        fails, info, log = r.check(mut, key)
        if a.corpus and info.get("n1") == 0 and not fails and "(no change)" not in muts:
            grow_corpus(a.corpus, mut, key, seed)
        stats["inputs"] += 1
        stats["clean_n1"] += info.get("n1") == 0
        for sig, text in fails:
            stats["failures"] += 1
            stats["hangs"] += sig.startswith("hang")
            new = sig not in stats["signatures"]
            stats["signatures"][sig] = stats["signatures"].get(sig, 0) + 1
            kept = keep(keepdir, sig, text, mut, key, img, muts, log, info)
            if new:
                print("fuzz_blackbox: input %d (seed %d, %s): %s%s" % (
                    i, seed, os.path.basename(img), sig, " (kept)" if kept else ""),
                    flush=True)
        i += 1
        if a.stats:
            with open(a.stats, "w") as f:
                json.dump(dict(stats, seconds=int(time.time() - t0)), f, indent=1)
    print("fuzz_blackbox: %d inputs in %d s (%d called clean by fsck -n), %d failures, "
          "%d hangs, %d distinct signatures" % (
              stats["inputs"], time.time() - t0, stats["clean_n1"], stats["failures"],
              stats["hangs"], len(stats["signatures"])))
    for sig, n in sorted(stats["signatures"].items()):
        print("  %5d  %s" % (n, sig))
    return 1 if stats["failures"] else 0


def finding_image(d, work):
    """A finding's image, decompressed; its key file (the seeds' key when encrypted)."""
    xz = os.path.join(d, "image.img.xz")
    img = os.path.join(work, os.path.basename(d) + ".img")
    with lzma.open(xz) as f, open(img + ".tmp", "wb") as o:
        shutil.copyfileobj(f, o)
    sparse_copy(img + ".tmp", img)
    os.unlink(img + ".tmp")
    key = None
    if os.path.exists(os.path.join(d, "encrypted")):
        key = os.path.join(HERE, "fuzz-seeds", "master.key")
    return img, key


def cmd_replay(a):
    dirs = sorted(d for d in glob.glob(os.path.join(a.findings, "*"))
                  if os.path.isdir(d) and os.path.basename(d) != "pending")
    if not dirs:
        print("fuzz_blackbox: no findings to replay in %s" % a.findings)
        return 0
    if not tools_ok(a.bin):
        return 77
    os.makedirs(a.work, exist_ok=True)
    r, bad = Runner(a.bin, a.work), 0
    for d in dirs:
        img, key = finding_image(d, r.work)
        fails, info, _ = r.check(img, key)
        os.unlink(img)
        print("fuzz_blackbox: %s: %s" % (os.path.basename(d), "ok" if not fails else
                                          "FAILS: " + ", ".join(f[0] for f in fails)))
        if fails:
            bad += 1
            for sig, text in fails:
                print("---- %s\n%s" % (sig, text[-3000:]))
    print("fuzz_blackbox: %d findings replayed, %d fail" % (len(dirs), bad))
    return 1 if bad else 0


def cmd_check(a):
    os.makedirs(a.work, exist_ok=True)
    r = Runner(a.bin, a.work)
    fails, info, log = r.check(a.image, a.key)
    print("\n".join(log))
    print("info:", json.dumps({k: v for k, v in info.items() if k != "walk"}))
    for sig, text in fails:
        print("FAILURE %s\n%s" % (sig, text[-6000:]))
    return 1 if fails else 0


def cmd_minimize(a):
    """Put back 4 KiB blocks from the original while the first failure stays."""
    os.makedirs(a.work, exist_ok=True)
    r = Runner(a.bin, a.work)
    fails, _, _ = r.check(a.image, a.key)
    if not fails:
        print("fuzz_blackbox: %s does not fail" % a.image)
        return 1
    target = fails[0][0]
    cur = a.image + ".min"
    sparse_copy(a.image, cur)
    with open(a.orig, "rb") as f:
        orig = f.read()
    with open(cur, "rb") as f:
        data = bytearray(f.read())
    diff = [o for o in range(0, len(data), 4096) if data[o:o + 4096] != orig[o:o + 4096]]
    print("fuzz_blackbox: %s fails with %s; %d blocks differ" % (a.image, target, len(diff)))
    for o in diff:
        trial = bytearray(data)
        trial[o:o + 4096] = orig[o:o + 4096]
        with open(cur + ".try", "wb") as f:
            f.write(trial)
        f2, _, _ = r.check(cur + ".try", a.key)
        if any(s == target for s, _ in f2):
            data = trial
            print("  block at %#x not needed" % o)
        else:
            print("  block at %#x needed" % o)
    with open(cur + ".try", "wb") as f:
        f.write(data)
    sparse_copy(cur + ".try", cur)
    os.unlink(cur + ".try")
    print("fuzz_blackbox: minimised image: %s" % cur)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sp = ap.add_subparsers(dest="cmd")
    p = sp.add_parser("run")
    p.add_argument("--bin", required=True)
    p.add_argument("--mutator", required=True)
    p.add_argument("--seeds", default=os.path.join(HERE, "fuzz-seeds"))
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--minutes", type=float, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", required=True)
    p.add_argument("--keep")
    p.add_argument("--stats")
    p.add_argument("--corpus")
    p = sp.add_parser("replay")
    p.add_argument("--bin", required=True)
    p.add_argument("--findings", required=True)
    p.add_argument("--work", required=True)
    p = sp.add_parser("check")
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--key")
    p.add_argument("image")
    p = sp.add_parser("minimize")
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--key")
    p.add_argument("--orig", required=True)
    p.add_argument("image")
    p = sp.add_parser("walk")
    p.add_argument("mnt")
    a = ap.parse_args()
    if a.cmd == "walk":
        walk(a.mnt)
        return 0
    if not a.cmd:
        ap.print_help()
        return 2
    if a.cmd == "run" and not a.iters and not a.minutes:
        a.iters = 20
    return {"run": cmd_run, "replay": cmd_replay, "check": cmd_check,
            "minimize": cmd_minimize}[a.cmd](a)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
