#!/usr/bin/env bash
# outside_progs.sh BUILD_DIR - benchmark programs nobody here wrote, with their own data
# checks, on zlfs; the most searching slice of the longer runs in docs/benchmarks.md
# ("Programs nobody here wrote").
# One image: 1 GiB of 8 MiB zones (so GC runs), every file compressed (zstd) and encrypted.
#   1. fio with verification: random overwrites (norandommap) of compressible data checked
#      as they go (verify_backlog, crc32c), O_DIRECT through libaio at depth 8 (md5), a
#      pattern with an fsync every 64 writes, and fallocate/punch-hole churn beside them
#      (fio's falloc engine: fio 3.33 cannot trim a regular file);
#      sysbench fileio --validate=on: random reads and writes, buffered with an fsync every
#      17 requests and O_DIRECT; fs_mark (create, write, fsync in four directories at once);
#      PostMark. Each program must succeed.
#   2. fio lays out a file with checksummed blocks and fsyncs it and its directory; then the
#      fio mix again, cut off by power loss (the daemon killed -9, every unflushed write
#      dropped by zlfs-emu powercut). The image must mount, and fio --verify_only must find
#      that file whole.
# After each, the daemon must exit 0 at unmount with no sanitizer report in its log, and
# fsck.zlfs -n must find the image clean. A program that is not installed is skipped with a
# message (tools/install-deps --tests installs them); exit 77 without fio or /dev/fuse.
set -uo pipefail
BUILD=${1:?usage: outside_progs.sh BUILD_DIR}
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/outside-progs
BIN=$BUILD/bin
[[ -c /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
command -v fio >/dev/null || { echo "SKIP: fio is not installed (apt-get install fio)"; exit 77; }
have() { command -v "$1" >/dev/null && return 0; echo "skipped: $1 is not installed (apt-get install $2)"; return 1; }

fail=0
daemon=
rm -rf "$T"
mkdir -p "$T/mnt"
KEY=$T/key
"$BIN/zlfs-ctl" genkey "$KEY" >/dev/null || { echo "FAIL: genkey"; exit 1; }

MOUNT_OPTS=(-o "keyfile=$KEY")
# shellcheck source=tests/progs_lib.sh
. "$(dirname "$0")/progs_lib.sh"

# step NAME CMD...: run CMD in the mount's w/ (its output in T/NAME.log); it must exit 0
step() {
	local name=$1 st s=$SECONDS
	shift
	(cd "$T/mnt/w" && "$@") >"$T/$name.log" 2>&1
	st=$?
	if [[ $st != 0 ]]; then
		echo "FAIL: $name exited with $st"; grep -m5 -iE "verify|err|fatal|fail" "$T/$name.log"; fail=1
	else
		echo "$name: ok ($((SECONDS - s)) s)"
	fi
}

# The fio mix. Overlapping writes in flight at once land in either order (fio's
# serialize_overlap keeps them apart, as their checks assume).
cat >"$T/mix.fio" <<'EOF'
[global]
size=16m
randrepeat=0
verify_fatal=1
do_verify=1
[overwrite-compressible]
rw=randwrite
bs=16k
norandommap=1
loops=2
verify=crc32c
verify_backlog=128
buffer_compress_percentage=60
refill_buffers=1
[direct-aio]
direct=1
ioengine=libaio
iodepth=8
serialize_overlap=1
rw=randwrite
bs=32k
norandommap=1
verify=md5
verify_backlog=64
[pattern-fsync]
rw=randwrite
bs=4k
verify=crc32c
verify_pattern=0xfeedf00d
fsync=64
[punch]
ioengine=falloc
rw=randtrim
bsrange=4k-1m
time_based=1
runtime=3
EOF
# The file whose survival phase 2 checks, and what fio --verify_only reads it back with.
DURABLE=(--name=durable --filename=durable --size=8m --bs=64k --rw=write --verify=crc32c)
fsync_dir_py='import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)'

"$BIN/zlfs-emu" create "$T/s.img" --size 1G --zone-size 8M >/dev/null &&
	"$BIN/mkfs.zlfs" -q --compress=zstd --encrypt --keyfile "$KEY" "$T/s.img" ||
	{ echo "FAIL: mkfs"; exit 1; }

# 1. every program to its end
mount_fs
mkdir -p "$T/mnt/w"
step fio fio --directory=. "$T/mix.fio"
if have sysbench sysbench; then
	SB=(sysbench fileio --file-total-size=64M --file-num=4 --validate=on --threads=4 --time=2)
	step sysbench-prepare "${SB[@]}" prepare
	step sysbench-rndrw "${SB[@]}" --file-test-mode=rndrw --file-fsync-freq=17 run
	step sysbench-rndrw-direct "${SB[@]}" --file-test-mode=rndrw --file-extra-flags=direct run
	step sysbench-cleanup "${SB[@]}" cleanup
fi
if have fs_mark fsmark; then
	# relative directories: fs_mark overflows a fixed buffer on long paths (on any filesystem)
	mkdir -p "$T/mnt/w/a" "$T/mnt/w/b" "$T/mnt/w/c" "$T/mnt/w/d"
	step fs_mark fs_mark -d a -d b -d c -d d -s 4096 -n 100 -L 2 -D 8 -S 1
	grep -qiE "overflow|error|failed" "$T/fs_mark.log" && { echo "FAIL: fs_mark"; cat "$T/fs_mark.log"; fail=1; }
fi
if have postmark postmark; then
	# its location relative: PostMark overflows a fixed buffer on long paths (on any filesystem)
	printf '%s\n' "set location ." "set number 250" "set transactions 800" \
		"set size 500 65536" "set subdirectories 8" "set buffering false" run quit >"$T/pm.cfg"
	step postmark postmark "$T/pm.cfg"
fi
rm -rf "$T/mnt/w" || { echo "FAIL: rm -rf"; fail=1; }
fusermount3 -u "$T/mnt"
daemon_done "the full run" 0
fsck_clean "the full run"

# 2. a durable file, then the fio mix cut off by power loss
mount_fs
mkdir -p "$T/mnt/w"
(cd "$T/mnt/w" && fio "${DURABLE[@]}" --end_fsync=1 --do_verify=0 && python3 -c "$fsync_dir_py" .) \
	>"$T/durable.log" 2>&1 || { echo "FAIL: writing the durable file"; tail -5 "$T/durable.log"; fail=1; }
(cd "$T/mnt/w" && exec setsid fio --directory=. --loops=50 "$T/mix.fio") >"$T/cut.log" 2>&1 &
fio_pid=$! # its own process group: the jobs it forked go with it
sleep 5
power_cut fio "$fio_pid"
if (cd "$T/mnt/w" && fio "${DURABLE[@]}" --verify_only --verify_fatal=1) >"$T/reverify.log" 2>&1; then
	echo "after the cut: mounted, the fsync'ed file whole ($(find "$T/mnt" | wc -l) names)"
else
	echo "FAIL: after the cut, the fsync'ed file"; grep -m5 -iE "verify|err" "$T/reverify.log"; fail=1
fi
fusermount3 -u "$T/mnt"
daemon_done "the mount after the cut" 0
fsck_clean "after the cut"
exit $fail
