#!/usr/bin/env bash
# passthrough_ops.sh BUILD_DIR - zlfs-passthrough (the baseline of tools/bench and
# tools/bench-apps) does what real applications ask of it. On a passthrough of a scratch
# directory: a directory renamed with files below it that the kernel already knows, then
# those files read, written and created anew by their new paths (they must land under the
# new name in the source); a hard link whose first name is unlinked; rename over a known
# file; renameat2's RENAME_NOREPLACE and RENAME_EXCHANGE; symlink and readlink; a FIFO;
# extended attributes on a file and a directory; fallocate (KEEP_SIZE, then a punched hole);
# fsync of a directory; statfs; git init, add, commit and fsck; rm -rf. The source directory
# must then hold exactly what the mount shows, and the daemon exit with 0 at the unmount.
# Exit 77 (skipped) without /dev/fuse.
set -uo pipefail
BUILD=${1:?usage: passthrough_ops.sh BUILD_DIR}
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/passthrough-ops
[[ -r /dev/fuse && -w /dev/fuse ]] && command -v fusermount3 >/dev/null ||
	{ echo "SKIP: /dev/fuse or fusermount3 not available"; exit 77; }
rm -rf "$T"
mkdir -p "$T/src" "$T/mnt"
SRC=$T/src M=$T/mnt
fail=0
bad() { echo "FAIL: $*"; fail=1; }
mounted() { awk -v m="$M" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
cleanup() { ! mounted || fusermount3 -u "$M" 2>/dev/null; }
trap cleanup EXIT

"$BUILD/bin/zlfs-passthrough" -f "$SRC" "$M" 2>"$T/daemon.log" &
PID=$!
for _ in $(seq 100); do mounted && break; sleep 0.05; done
mounted || { cat "$T/daemon.log"; echo "FAIL: the passthrough did not mount"; exit 1; }

# a renamed directory: the kernel keeps the inodes below it and asks by inode, not by name
mkdir -p "$M/a/b/c" && echo one >"$M/a/b/c/f" && cat "$M/a/b/c/f" >/dev/null
mv "$M/a" "$M/z" || bad "rename of a directory"
[[ $(cat "$M/z/b/c/f" 2>&1) == one ]] || bad "a file below a renamed directory: $(cat "$M/z/b/c/f" 2>&1)"
echo two >>"$M/z/b/c/f" && echo new >"$M/z/b/c/g" || bad "writing below a renamed directory"
[[ $(cat "$SRC/z/b/c/f" 2>&1) == $'one\ntwo' && -f $SRC/z/b/c/g && ! -e $SRC/a ]] ||
	bad "the source does not hold the renamed tree"

# a hard link outlives its first name
ln "$M/z/b/c/f" "$M/h" || bad "link"
rm "$M/z/b/c/f"
[[ $(stat -c %h "$M/h") == 1 && $(cat "$M/h" 2>&1) == $'one\ntwo' ]] || bad "the link after its first name went: $(cat "$M/h" 2>&1)"
echo three >>"$M/h" || bad "writing through the remaining link"

# rename over a file the kernel knows, then the flags of renameat2
echo x >"$M/x" && echo y >"$M/y" && cat "$M/y" >/dev/null
mv "$M/x" "$M/y" && [[ $(cat "$M/y") == x && ! -e $M/x ]] || bad "rename over an existing file"
echo x2 >"$M/x"
python3 - "$M" <<'PY' || fail=1
import ctypes, errno, os, sys
m = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
def rename2(a, b, flags):
    r = libc.renameat2(-100, os.path.join(m, a).encode(), -100, os.path.join(m, b).encode(), flags)
    return 0 if r == 0 else ctypes.get_errno()
if rename2("x", "y", 1) != errno.EEXIST:  # RENAME_NOREPLACE
    print("FAIL: RENAME_NOREPLACE over an existing file did not say EEXIST"); sys.exit(1)
if rename2("x", "y", 2) or open(m + "/x").read() != "x\n" or open(m + "/y").read() != "x2\n":
    print("FAIL: RENAME_EXCHANGE did not swap x and y"); sys.exit(1)
fd = os.open(m + "/z", os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)  # fsyncdir
os.close(fd)
os.setxattr(m + "/y", "user.k", b"v1")
os.mkdir(m + "/d")
os.setxattr(m + "/d", "user.dk", b"dv")
if os.getxattr(m + "/y", "user.k") != b"v1" or os.listxattr(m + "/y") != ["user.k"] \
        or os.getxattr(m + "/d", "user.dk") != b"dv":
    print("FAIL: extended attributes read back wrong"); sys.exit(1)
os.removexattr(m + "/y", "user.k")
if os.listxattr(m + "/y"):
    print("FAIL: removexattr left the attribute"); sys.exit(1)
st = os.statvfs(m)
if st.f_blocks == 0:
    print("FAIL: statfs says no blocks"); sys.exit(1)
PY
python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.dk").decode())' "$SRC/d" 2>/dev/null | grep -qx dv ||
	bad "the directory's attribute is not on the source"

# symlinks and a FIFO
ln -s z/b/c/g "$M/s" && [[ $(readlink "$M/s") == z/b/c/g && $(cat "$M/s") == new ]] || bad "symlink/readlink"
[[ -L $SRC/s ]] || bad "the symlink is not a symlink in the source"
mkfifo "$M/p" && [[ -p $SRC/p ]] || bad "mkfifo"

# fallocate: a reservation past the end of the file, then a hole punched in written data
touch "$M/fa" && fallocate -n -l 1M "$M/fa" || bad "fallocate --keep-size"
[[ $(stat -c %s "$M/fa") == 0 && $(stat -c %b "$M/fa") -ge 2048 ]] || bad "fallocate --keep-size: size $(stat -c %s "$M/fa"), $(stat -c %b "$M/fa") blocks"
head -c 1M /dev/urandom >"$M/fp" && sync "$M/fp" && fallocate -p -o 0 -l 512K "$M/fp" || bad "punch hole"
[[ $(stat -c %s "$M/fp") == 1048576 ]] && cmp -s -n 524288 "$M/fp" /dev/zero || bad "the punched range does not read as zeros"

# git, which renames, links and fsyncs on its own
mkdir "$M/repo" && cp -r "$(dirname "$0")" "$M/repo/t" || bad "copying a tree in"
if (cd "$M/repo" && git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm t &&
	git fsck --strict 2>&1 && [[ -z $(git status --porcelain) ]]) >"$T/git.log" 2>&1; then :; else
	cat "$T/git.log"; bad "git init/add/commit/fsck on the passthrough"
fi

# the source holds what the mount shows (names, types, sizes, link counts)
listing() { (cd "$1" && find . -printf '%p %y %s %n\n' | grep -v '^\. ' | LC_ALL=C sort); }
diff <(listing "$M") <(listing "$SRC") >"$T/diff" || { head -20 "$T/diff"; bad "the source differs from the mount"; }
rm -rf "$M/repo" "$M/z" || bad "rm -rf"
[[ ! -e $SRC/repo && ! -e $SRC/z ]] || bad "rm -rf left files in the source"

fusermount3 -u "$M"
wait "$PID" || { cat "$T/daemon.log"; bad "the passthrough exited with $?"; }
[[ ! -s $T/daemon.log ]] || { cat "$T/daemon.log"; bad "the passthrough wrote to stderr"; }
[[ $fail == 0 ]] && echo "PASS: rename, links, symlinks, xattrs, fallocate, fsyncdir, git on the passthrough"
exit $fail
