#!/usr/bin/env bash
# stress_ng.sh BUILD_DIR - stress-ng's filesystem stressors, a suite nobody here wrote, on zlfs.
# Twice: plain, and with every file compressed (LZ4) and encrypted (mkfs --compress --encrypt).
# Each time a 1 GiB image of 8 MiB zones (so GC runs) mounted by the build's daemon; then:
#   1. about thirty stressors at once (file I/O with --verify, names, links, renames, xattrs,
#      fallocate and punch, locks, AIO, directories, chattr), STRESS_NG_SECS seconds (default 20):
#      stress-ng must exit 0;
#   2. the same mix again, cut off by power loss mid-run (the daemon killed, every unflushed
#      write dropped by zlfs-emu powercut): the image must mount again;
# after each, the daemon must exit 0 at unmount with no sanitizer report in its log, and
# fsck.zlfs -n must find the image clean. Exit 77 (skipped) without /dev/fuse or stress-ng.
set -uo pipefail
BUILD=${1:?usage: stress_ng.sh BUILD_DIR}
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/stress-ng
BIN=$BUILD/bin
SECS=${STRESS_NG_SECS:-20}
[[ -c /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
command -v stress-ng >/dev/null || { echo "SKIP: stress-ng is not installed"; exit 77; }

# One or two of each; the byte sizes keep the files within the image with room for GC.
MIX=(--hdd 2 --hdd-bytes 24M --iomix 1 --iomix-bytes 16M --dir 1 --rename 1 --link 1
     --symlink 1 --xattr 1 --fallocate 1 --fallocate-bytes 16M --fpunch 1 --dentry 1
     --dentries 512 --sync-file 1 --sync-file-bytes 16M --filename 1 --aio 1 --readahead 1
     --readahead-bytes 16M --seek 1 --seek-size 16M --lockf 1 --flock 1 --fcntl 1 --chmod 1
     --utime 1 --getdent 1 --fsize 1 --open 1 --touch 1
     --access 1 --dirdeep 1 --dirdeep-dirs 2 --dirdeep-inodes 2000 --fstat 1 --lease 1
     --chattr 1)

fail=0
daemon=
MOUNT_OPTS=()
# shellcheck source=tests/progs_lib.sh
. "$(dirname "$0")/progs_lib.sh"

# run_variant NAME MKFS_OPTS...: both phases on a fresh image
run_variant() {
	local name=$1 st n sng
	shift
	rm -rf "$T"
	mkdir -p "$T/mnt"
	"$BIN/zlfs-emu" create "$T/s.img" --size 1G --zone-size 8M >/dev/null &&
		"$BIN/mkfs.zlfs" -q "$@" "$T/s.img" || { echo "FAIL: $name: mkfs"; exit 1; }

	# 1. the mix to its end
	mount_fs
	mkdir -p "$T/mnt/t"
	# in the mount: some stressors make files in the working directory too
	(cd "$T/mnt/t" && stress-ng --temp-path "$T/mnt/t" -t "$SECS" --verify --metrics-brief \
		"${MIX[@]}") >"$T/run1.log" 2>&1
	st=$?
	grep -E "successful run|unsuccessful|fail:|error:" "$T/run1.log" | sed "s/^/$name: /" | head -20
	[[ $st == 0 ]] || { echo "FAIL: $name: stress-ng exited with $st"; fail=1; }
	# the chattr stressor's last step sets every flag it can, +i among them, and may leave
	# its file so (as on ext4)
	chattr -R -i -a "$T/mnt/t" 2>/dev/null
	rm -rf "$T/mnt/t"
	fusermount3 -u "$T/mnt"
	daemon_done "$name, the full run" 0
	fsck_clean "$name, the full run"

	# 2. the mix cut off by power loss
	mount_fs
	mkdir -p "$T/mnt/t"
	(cd "$T/mnt/t" && exec setsid stress-ng --temp-path "$T/mnt/t" -t $((SECS * 3)) \
		"${MIX[@]}") >"$T/run2.log" 2>&1 &
	sng=$! # its own process group: the stressors it forked go with it
	sleep $((SECS / 2))
	power_cut "$name" "$sng"
	n=$(find "$T/mnt" | wc -l)
	echo "$name, after the cut: mounted, $n names"
	fusermount3 -u "$T/mnt"
	daemon_done "$name, the mount after the cut" 0
	fsck_clean "$name, after the cut"
}

KEY=$TMP/stress-ng.key
mkdir -p "$TMP"
rm -f "$KEY" # genkey will not overwrite the key of an earlier run
"$BIN/zlfs-ctl" genkey "$KEY" >/dev/null || { echo "FAIL: genkey"; exit 1; }
run_variant plain
MOUNT_OPTS=(-o "keyfile=$KEY")
run_variant "compressed and encrypted" --compress=lz4 --encrypt --keyfile "$KEY"
exit $fail
