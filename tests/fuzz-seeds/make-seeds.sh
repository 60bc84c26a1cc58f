#!/usr/bin/env bash
# make-seeds.sh BIN_DIR [OUT_DIR] - rebuild the black-box mode's seed images (xz-compressed,
# next to this script by default) with the real binaries: zlfs-emu, mkfs.zlfs, the zlfs
# daemon and zlfs-ctl, files written through the mount as a user writes them.
#
#   plain.img     16 MiB, 1 MiB zones, the default layout (6 logs): a tree of directories,
#                 files of many sizes (those of at most 3,908 bytes inline in their inodes),
#                 a sparse file past the inode's pointers, a hard link, an inline and a long
#                 symlink, xattrs (one file's in an xattr node); clean
#   enc.img       24 MiB, 10 logs, --encrypt --keyfile master.key (the test key kept here)
#   logs2/4/7/10.img  the same small tree under each other layout (--logs N)
#   rollfwd.img   files fsync'ed after the last checkpoint (an inline one among them), then
#                 the daemon killed (-9) and the emulator's power cut: roll-forward work for
#                 the next mount
#   orphan.img    a file unlinked while held open, in a checkpoint (zlfs-ctl sync), then the
#                 daemon killed: an orphan to free at the next mount
#   nearfull.img  16 MiB filled, half deleted and rewritten so GC is under way, then killed
#   xattr.img     16 MiB, the small tree and a file with 600 xattrs over a chain of xattr
#                 nodes, values of 5,000, 30,000 and 65,536 bytes in value nodes, a third of
#                 the small ones removed (nodes emptied and the chain compacted), a 20,000-byte
#                 value on a directory (XATTR_NODES feature); clean
# NAME-old.img (enc-old.img for the encrypted one) are these seeds as make-seeds.sh made them on
# 2026-12-06, before packed inodes were the default and before inline directories and spanning
# slots: kept as they are, seeds of the older layout (an image older builds made is input too).
# The ones without the suffix were made again on 2026-12-07 (main at f0e8b36): small inodes in
# packs, spanning slots, small directories inline.
# The content is deterministic; uuids and times are not (mkfs draws them). Exit 77 without
# FUSE.
set -euo pipefail
B=${1:?usage: make-seeds.sh BIN_DIR [OUT_DIR]}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE}
KEY=$HERE/master.key
[[ -c /dev/fuse ]] && command -v fusermount3 >/dev/null || { echo "SKIP: no FUSE"; exit 77; }
T=$(mktemp -d)
MNT=$T/mnt
mkdir -p "$MNT" "$OUT"
PID=
cleanup() { fusermount3 -u "$MNT" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT

mk() { # mk NAME SIZE_MIB [mkfs options...]
	local img=$T/$1.img size=$2
	shift 2
	"$B/zlfs-emu" create "$img" --size "${size}M" --zone-size 1M >/dev/null
	"$B/mkfs.zlfs" -q "$@" "$img"
}
mnt() { # mnt NAME [zlfs options...]: the daemon in the foreground, in the background
	local img=$T/$1.img
	shift
	"$B/zlfs" -f -o cp_interval=0 "$@" "$img" "$MNT" &
	PID=$!
	for _ in $(seq 200); do mountpoint -q "$MNT" && return 0; sleep 0.05; done
	echo "make-seeds: $img did not mount" >&2
	exit 1
}
umnt() { fusermount3 -u "$MNT"; wait "$PID"; }
killed() { kill -9 "$PID"; wait "$PID" 2>/dev/null || true; fusermount3 -u -z "$MNT" 2>/dev/null || true; }
tree() { # tree NFILES: the common tree, through the mount
	python3 - "$MNT" "$1" <<'EOF'
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
def w(p, data, at=0):
    with open(p, "r+b" if os.path.exists(p) else "wb") as f:
        f.seek(at); f.write(data)
os.makedirs(m + "/dir/sub")
for i in range(n):
    p = "%s/dir/file-with-a-longer-name-%02d" % (m, i)
    w(p, bytes((i * 7 + k // 97) % 251 for k in range(i * 517)))
    os.setxattr(p, "user.fuzz", p.encode()[-20:])
w(m + "/dir/sub/deep", b"deep " * 1800)
w(m + "/big", b"b" * 8192)
w(m + "/big", b"c" * 8192, 977 * 4096)      # past the inode's own pointers
w(m + "/big", b"d" * 4096, 3 << 30)         # a double-indirect node
os.link(m + "/big", m + "/big2")
for i in range(24):                          # an xattr node
    os.setxattr(m + "/big", "user.attr-%02d" % i, b"x" * 150)
os.symlink("dir/sub/deep", m + "/link")
os.symlink("x" * 600, m + "/longlink")
os.mkdir(m + "/empty")
EOF
}

mk plain 16; mnt plain; tree 40; umnt
mk enc 24 --logs 10 --encrypt --keyfile "$KEY"; mnt enc -o keyfile="$KEY"; tree 12; umnt
for n in 2 4 7 10; do
	size=16; [[ $n -ge 7 ]] && size=24
	mk logs$n $size --logs $n; mnt logs$n; tree 8; umnt
done

mk rollfwd 16; mnt rollfwd; tree 10
"$B/zlfs-ctl" sync "$MNT"
python3 - "$MNT" <<'EOF'
import os, sys
m = sys.argv[1]
for i in range(3):
    with open("%s/rolled-%d" % (m, i), "wb") as f:
        f.write(bytes([65 + i]) * (5000 * (i + 1))); f.flush(); os.fsync(f.fileno())
with open(m + "/dir/file-with-a-longer-name-03", "r+b") as f:
    f.seek(100); f.write(b"R" * 9000); os.fsync(f.fileno())
with open(m + "/dir/file-with-a-longer-name-02", "r+b") as f:  # 1,034 bytes: inline
    f.seek(10); f.write(b"I" * 100); os.fsync(f.fileno())
EOF
killed; "$B/zlfs-emu" powercut "$T/rollfwd.img" --seed 7 >/dev/null

mk orphan 16; mnt orphan; tree 6
python3 - "$MNT" "$B/zlfs-ctl" <<'EOF' &
import os, subprocess, sys, time
m = sys.argv[1]
f = open(m + "/orphan", "wb"); f.write(b"o" * 20000); f.flush(); os.fsync(f.fileno())
os.unlink(m + "/orphan")
subprocess.run([sys.argv[2], "sync", m], check=True)
open(m + "/ready", "w").close()
time.sleep(60)
EOF
HOLDER=$!
for _ in $(seq 200); do [[ -e $MNT/ready ]] && break; sleep 0.05; done
killed; kill "$HOLDER" 2>/dev/null || true; wait "$HOLDER" 2>/dev/null || true

mk nearfull 16; mnt nearfull
python3 - "$MNT" <<'EOF'
import os, sys
m = sys.argv[1]
blob = bytes(range(256)) * 1024          # 256 KiB
paths = []
for i in range(40):                      # fill until the filesystem says no
    p = "%s/f%02d" % (m, i)
    try:
        with open(p, "wb") as f: f.write(blob)
        paths.append(p)
    except OSError:
        break
for p in paths[::2]:
    os.unlink(p)
for i in range(200):                     # rewrite until full again: GC has to make room
    try:
        with open("%s/g%03d" % (m, i), "wb") as f: f.write(blob[: 100 * 1024])
    except OSError:
        break
for i in range(0, 200, 3):
    try: os.unlink("%s/g%03d" % (m, i))
    except OSError: pass
EOF
"$B/zlfs-ctl" sync "$MNT"
killed

mk xattr 16; mnt xattr; tree 6
python3 - "$MNT" <<'EOF'
import os, sys
m = sys.argv[1]
p = m + "/many"
with open(p, "wb") as f: f.write(b"m" * 100)
for i in range(600):                          # a chain of xattr nodes
    os.setxattr(p, "user.small-%03d" % i, bytes([i % 251]) * (10 + i % 40))
for i, n in enumerate((5000, 30000, 65536)):  # values in value nodes
    os.setxattr(p, "user.big-%d" % i, bytes((k * 7 + i) % 256 for k in range(n)))
for i in range(0, 600, 3):                    # nodes emptied, the chain compacted
    os.removexattr(p, "user.small-%03d" % i)
os.setxattr(m + "/dir", "trusted.dir", b"d" * 20000)
EOF
umnt

for img in "$T"/*.img; do
	xz -9 -T1 -c "$img" >"$OUT/$(basename "$img").xz"
done
ls -l "$OUT"/*.img.xz
