#!/usr/bin/env bash
# mkfs_root_dir.sh BUILD_DIR - mkfs.zlfs --root-dir (sload), --timestamp and --uuid.
#   1. A source tree with every kind of entry (nested directories, files from empty to 3 MiB,
#      inline-sized ones, a sparse file, hard links across directories, short and long
#      symlinks, a fifo, device nodes, setuid and odd modes, other owners, user. and trusted.
#      xattrs, names with spaces and UTF-8, times before 1970 and with nanoseconds) goes in
#      with its own times: fsck.zlfs -n is clean, and mounted, `diff -r` finds nothing and
#      a manifest of every entry (type, mode, owner, links, size, mtime and ctime to the
#      nanosecond, device numbers, symlink targets, xattrs, which names share an inode)
#      matches the source's.
#   2. Reproducible images: the same tree with --timestamp twice on fresh images is
#      byte-identical (cmp; the emulator's journal made small, so it fills and flushes
#      itself as it does under a large tree), every time inside is the timestamp; another --uuid or label
#      gives another image. Encrypted (--encrypt --keyfile) the same holds, and the mount
#      with the key shows the tree.
#   3. Bad input: a --root-dir that is not a directory, and a tree larger than the device,
#      fail with a message naming the cause and exit 1.
# Exit 77 (skipped) without /dev/fuse or fusermount3. Owners, device nodes and trusted.
# xattrs need root; without it they are left out of the tree.
set -uo pipefail
BUILD=${1:?usage: mkfs_root_dir.sh BUILD_DIR}
B=$BUILD/bin
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/mkfs-root-dir
[[ -c /dev/fuse ]] && command -v fusermount3 >/dev/null || { echo "SKIP: no /dev/fuse"; exit 77; }
rm -rf "$T"
mkdir -p "$T/mnt"
SRC=$T/src MNT=$T/mnt
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cleanup() { fusermount3 -u "$MNT" 2>/dev/null; }
trap cleanup EXIT
root=0
[[ $(id -u) == 0 ]] && root=1

# ---- the source tree ----------------------------------------------------------------------
python3 - "$SRC" "$root" <<'EOF' || { echo "FAIL: cannot build the source tree"; exit 1; }
import os, random, struct, sys
src, root = sys.argv[1], sys.argv[2] == "1"
rnd = random.Random(36)
os.makedirs(src)
def put(p, data):
    with open(p, "wb") as f:
        f.write(data)
for d in range(6):
    dp = os.path.join(src, f"dir {d}", "sub é" if d % 2 else "sub")
    os.makedirs(dp)
    for i in range(40):
        size = rnd.choice([0, 1, 100, 3000, 3908, 3909, 4096, 6000, 70000, 300000])
        put(os.path.join(dp, f"f{i:03d}"), rnd.randbytes(size))
put(os.path.join(src, "big"), rnd.randbytes(3 << 20))
with open(os.path.join(src, "sparse"), "wb") as f:
    f.seek(5 << 20); f.write(b"middle"); f.truncate(12 << 20)
os.link(os.path.join(src, "dir 0", "sub", "f001"), os.path.join(src, "dir 3", "hard-f001"))
os.link(os.path.join(src, "dir 0", "sub", "f001"), os.path.join(src, "hard-f001"))
os.link(os.path.join(src, "big"), os.path.join(src, "dir 5", "big-again"))
os.symlink("dir 0/sub/f002", os.path.join(src, "short-link"))
os.symlink("x" * 1000, os.path.join(src, "dir 1", "long-link"))
os.symlink("/nonexistent/target", os.path.join(src, "dangling"))
os.mkfifo(os.path.join(src, "fifo"))
os.makedirs(os.path.join(src, "empty dir"))
os.chmod(os.path.join(src, "dir 2", "sub", "f003"), 0o4711)
os.chmod(os.path.join(src, "dir 2", "sub"), 0o2750)
os.chmod(os.path.join(src, "dir 4", "sub", "f000"), 0o000)
os.setxattr(os.path.join(src, "big"), "user.checksum", b"abc" * 30)
os.setxattr(os.path.join(src, "dir 1"), "user.empty", b"")
os.setxattr(os.path.join(src, "dir 1", "sub é", "f010"), "user.a", rnd.randbytes(900))
os.setxattr(os.path.join(src, "dir 1", "sub é", "f010"), "user.b", b"two")
if root:
    os.mknod(os.path.join(src, "null"), 0o20666, os.makedev(1, 3))
    os.mknod(os.path.join(src, "loop7"), 0o60640, os.makedev(7, 7))
    os.chown(os.path.join(src, "dir 3"), 1234, 5678)
    os.chown(os.path.join(src, "dir 3", "sub é", "f005"), 4321, 8765)
    os.lchown(os.path.join(src, "short-link"), 77, 88)
    os.setxattr(os.path.join(src, "dir 5"), "trusted.note", b"root only")
    # POSIX ACLs in their xattr form (version 2; tag, perm, id): a named user and a mask on
    # a file, the same as a directory's default ACL. A host without ACLs leaves them out.
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in (
        (0x01, 6, 0xFFFFFFFF), (0x02, 4, 1000), (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
        (0x20, 0, 0xFFFFFFFF)))
    try:
        os.chmod(os.path.join(src, "big"), 0o640)
        os.setxattr(os.path.join(src, "big"), "system.posix_acl_access", acl)
        os.setxattr(os.path.join(src, "dir 5"), "system.posix_acl_default", acl)
    except OSError:
        pass
os.utime(os.path.join(src, "dir 0", "sub", "f004"), ns=(-86400 * 365 * 10 * 10**9, -123456789))
os.utime(os.path.join(src, "short-link"), ns=(10**18, 981173106123456789), follow_symlinks=False)
os.utime(os.path.join(src, "dir 0"), ns=(10**18, 981173106000000001))
EOF

# A manifest of every entry under $1, one line each, with link groups as sorted name lists.
manifest() {
	python3 - "$1" <<'EOF'
import os, stat, sys
top = sys.argv[1]
groups = {}
rows = []
for dp, dns, fns in os.walk(top):
    for n in sorted(dns + fns) + ([] if dp != top else []):
        p = os.path.join(dp, n)
        r = os.path.relpath(p, top)
        st = os.lstat(p)
        t = stat.S_IFMT(st.st_mode)
        line = [r, oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink, st.st_mtime_ns, st.st_ctime_ns]
        if not stat.S_ISDIR(st.st_mode):
            line.append(st.st_size)
        if stat.S_ISCHR(t) or stat.S_ISBLK(t):
            line.append((os.major(st.st_rdev), os.minor(st.st_rdev)))
        if stat.S_ISLNK(t):
            line.append(os.readlink(p))
        xs = {}
        for x in sorted(os.listxattr(p, follow_symlinks=False)):
            xs[x] = os.getxattr(p, x, follow_symlinks=False).hex()
        line.append(xs)
        rows.append(repr(line))
        if not stat.S_ISDIR(t) and st.st_nlink > 1:
            groups.setdefault(st.st_ino, []).append(r)
st = os.lstat(top)
rows.append(repr([".", oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink, st.st_mtime_ns,
                  st.st_ctime_ns, {x: os.getxattr(top, x).hex() for x in sorted(os.listxattr(top))}]))
for g in sorted(sorted(v) for v in groups.values()):
    rows.append("links " + repr(g))
print("\n".join(sorted(rows)))
EOF
}

mount_check() { # IMAGE WHAT [zlfs options...]: mounted, the tree is the source's
	local img=$1 what=$2
	shift 2
	"$B/zlfs" "$img" "$MNT" "$@" || { bad "$what: mount failed"; return 1; }
	# diff -r says of every fifo and device node that it cannot compare them (the manifest does)
	diff -r --no-dereference "$SRC" "$MNT" 2>&1 |
		grep -Ev '^File .* is a (fifo|character special file|block special file) while file .* is a \1$' >"$T/diff"
	[[ -s $T/diff ]] && { bad "$what: diff -r:"; head -20 "$T/diff"; }
	fusermount3 -u "$MNT" || bad "$what: unmount failed"
}

new_image() { # IMAGE [SIZE [zlfs-emu create options...]]
	local img=$1 size=${2:-128M}
	shift $(($# < 2 ? $# : 2))
	rm -f "$img"
	"$B/zlfs-emu" create "$img" --size "$size" --zone-size 2M --max-open 14 --max-active 14 "$@" >/dev/null ||
		{ echo "FAIL: zlfs-emu create"; exit 1; }
}

# ---- 1. the tree with its own times --------------------------------------------------------
new_image "$T/a.img"
"$B/mkfs.zlfs" --root-dir "$SRC" "$T/a.img" >"$T/mkfs.out" 2>&1 || { cat "$T/mkfs.out"; bad "mkfs.zlfs --root-dir failed"; }
grep '^loaded' "$T/mkfs.out"
"$B/fsck.zlfs" -n "$T/a.img" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; bad "fsck.zlfs -n after --root-dir"; }
manifest "$SRC" >"$T/src.manifest"
mount_check "$T/a.img" "host times"
"$B/zlfs" "$T/a.img" "$MNT" -o ro && manifest "$MNT" >"$T/mnt.manifest"
fusermount3 -u "$MNT"
if ! diff "$T/src.manifest" "$T/mnt.manifest" >"$T/manifest.diff"; then
	bad "the mounted tree's manifest differs from the source's:"
	head -20 "$T/manifest.diff"
fi
n=$(wc -l <"$T/src.manifest")
((n > 250)) || bad "the manifest has $n lines: the tree was not built"
echo "manifest: $n entries and link groups compared"

# ---- 2. reproducible images ----------------------------------------------------------------
# a small emulator journal: it fills and flushes itself many times, as a large tree's would
for i in 1 2; do
	new_image "$T/r$i.img" 128M --journal-slots 64
	"$B/mkfs.zlfs" -q -T 1700000000 -L repro -d "$SRC" "$T/r$i.img" || bad "mkfs -T run $i failed"
done
cmp "$T/r1.img" "$T/r2.img" && echo "reproducible: two runs of mkfs.zlfs -T are identical" ||
	bad "two runs of mkfs.zlfs -T differ"
new_image "$T/r3.img" 128M --journal-slots 64
"$B/mkfs.zlfs" -q -T 1700000000 -L repro -U 0123456789abcdef0123456789abcdef -d "$SRC" "$T/r3.img"
cmp -s "$T/r1.img" "$T/r3.img" && bad "another --uuid made the same image"
"$B/zlfs-dump" --super "$T/r3.img" 2>/dev/null | grep -qi "01234567-89ab-cdef-0123-456789abcdef" ||
	bad "--uuid is not the superblock's UUID"
"$B/fsck.zlfs" -n "$T/r1.img" >/dev/null 2>&1 || bad "fsck.zlfs -n on the reproducible image"
mount_check "$T/r1.img" "reproducible"
"$B/zlfs" "$T/r1.img" "$MNT" -o ro &&
	other=$(find "$MNT" -newermt @1700000000 -o ! -newermt @1699999999 | wc -l)
fusermount3 -u "$MNT"
[[ ${other:-x} == 0 ]] || bad "${other:-?} entries of the -T image have a time other than the timestamp"

head -c 64 /dev/urandom >"$T/key"
for i in 1 2; do
	new_image "$T/e$i.img"
	"$B/mkfs.zlfs" -q -T 1700000000 --encrypt --keyfile "$T/key" -d "$SRC" "$T/e$i.img" ||
		bad "encrypted mkfs -T run $i failed"
done
cmp "$T/e1.img" "$T/e2.img" && echo "reproducible: two encrypted runs are identical" ||
	bad "two encrypted runs of mkfs.zlfs -T differ"
cmp -s "$T/e1.img" "$T/r1.img" && bad "the encrypted image is the plain one"
grep -qa "f001" "$T/e1.img" && bad "a file name is in the encrypted image in plaintext"
"$B/fsck.zlfs" -n "$T/e1.img" >/dev/null 2>&1 || bad "fsck.zlfs -n on the encrypted image"
mount_check "$T/e1.img" "encrypted" -o keyfile="$T/key"

# ---- 3. bad input -------------------------------------------------------------------------
new_image "$T/x.img"
"$B/mkfs.zlfs" -q -d "$SRC/big" "$T/x.img" 2>"$T/err" && bad "--root-dir of a file succeeded"
grep -q "Not a directory" "$T/err" || { bad "no clear message for a file as --root-dir:"; cat "$T/err"; }
new_image "$T/small.img" 32M
head -c $((40 << 20)) /dev/urandom >"$T/toobig" && mkdir -p "$T/bigsrc" && mv "$T/toobig" "$T/bigsrc/"
"$B/mkfs.zlfs" -q -d "$T/bigsrc" "$T/small.img" 2>"$T/err" && bad "a tree larger than the device fit"
grep -q "No space left" "$T/err" || { bad "no clear message for a tree larger than the device:"; cat "$T/err"; }

[[ $fail == 0 ]] && echo "1 passed, 0 failed" || echo "FAIL"
exit $fail
