#!/bin/bash
# zoned_guest.sh - the zoned-guest test: zlfs on kernel zoned block devices, in one QEMU guest.
#
# Owns: the devices the test asks tools/zoned-vm for, what runs on each inside the guest
# (test_zdev with ZLFS_TEST_DEV, mkfs.zlfs -f, then the zlfs daemon: copy a tree in, unmount,
# remount, compare, fsck.zlfs), and the per-device summary.
# May call: tools/zoned-vm, the build's test_zdev, mkfs.zlfs, zlfs and fsck.zlfs.
#
# usage: tests/zoned_guest.sh BUILD_DIR
# Exit: 0 all passed, 1 a failure (anything failing inside the guest counts), 77 skipped
# because qemu or a kernel cannot be found or installed here.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(dirname "$here")

# One null_blk disk (RAM-backed, conventional zones, limits) and one NVMe ZNS namespace whose
# zone capacity is smaller than its zone size. Sizes keep guest memory near 3 GiB.
NULLB=size=2G,zone_size=16M,conv=8,max_open=8,max_active=12
ZNS=size=1G,zone_size=64M,zone_capacity=48M,max_open=6,max_active=8

# --- inside the guest ------------------------------------------------------------------------

# run_step NAME LOG CMD...: run CMD, keep its output in LOG, print it when CMD fails.
run_step() {
	local name=$1 log=$2
	shift 2
	if "$@" >"$log" 2>&1; then
		return 0
	fi
	echo "---- $name failed (exit $?): output follows"
	cat "$log"
	echo "----"
	return 1
}

# mount_cycle BUILD DEVICE: the daemon on a real zoned device - write, remount, compare, check.
mount_cycle() {
	local build=$1 dev=$2 mnt=/tmp/zlfs-mnt pid
	mkdir -p "$mnt"
	"$build/bin/zlfs" -f "$dev" "$mnt" & pid=$!
	for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
	mountpoint -q "$mnt" || { echo "zlfs did not mount $dev"; return 1; }
	cp -a "$src/fs" "$mnt/tree" && dd if=/dev/urandom of=/tmp/zlfs-big bs=1M count=24 status=none &&
		cp /tmp/zlfs-big "$mnt/big" && sync -f "$mnt/big" || { fusermount3 -u "$mnt"; return 1; }
	fusermount3 -u "$mnt" && wait "$pid" || { echo "zlfs exited with an error"; return 1; }
	"$build/bin/zlfs" -f "$dev" "$mnt" & pid=$!
	for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
	diff -r "$src/fs" "$mnt/tree" && cmp /tmp/zlfs-big "$mnt/big"
	local same=$?
	fusermount3 -u "$mnt" && wait "$pid" || { echo "zlfs exited with an error"; return 1; }
	((same == 0)) || { echo "contents differ after remount"; return 1; }
	"$build/bin/fsck.zlfs" -v "$dev"
}

guest_one_device() { # BUILD DEVICE
	local build=$1 dev=$2 name zdev mkfs checks
	name=${dev#/dev/}
	zdev="test_zdev FAIL"
	if run_step "test_zdev on $dev" "/tmp/$name.zdev.log" \
		env ZLFS_TEST_DEV="$dev" ZLFS_TEST_TMP=/tmp ZLFS_BIN_DIR="$build/bin" "$build/tests/test_zdev"; then
		checks=$(grep -o 'Checks: [0-9]*' "/tmp/$name.zdev.log" | head -n1)
		zdev="test_zdev PASS (${checks:-?})"
	fi
	mkfs="mkfs.zlfs FAIL"
	if [[ ! -x $build/bin/mkfs.zlfs ]]; then
		echo "---- mkfs.zlfs is not built in $build/bin"
	elif run_step "mkfs.zlfs -f $dev" "/tmp/$name.mkfs.log" "$build/bin/mkfs.zlfs" -f "$dev"; then
		mkfs="mkfs.zlfs PASS"
		sed 's/^/    /' "/tmp/$name.mkfs.log"
	fi
	mount="zlfs mount FAIL"
	if [[ $mkfs == *PASS* ]] && run_step "zlfs on $dev" "/tmp/$name.mount.log" mount_cycle "$build" "$dev"; then
		mount="zlfs mount/remount/fsck PASS"
	fi
	grep -h '^zdev: /dev' "/tmp/$name.zdev.log" 2>/dev/null | sed 's/^zdev: /  /'
	echo "RESULT $name: $zdev, $mkfs, $mount"
	[[ $zdev == *PASS* && $mkfs == *PASS* && $mount == *PASS* ]]
}

guest_main() { # BUILD
	local build=$1 dev failed=0 n=0
	echo "guest: kernel $(uname -r), devices: $ZONED_VM_NULLB $ZONED_VM_ZNS"
	for dev in $ZONED_VM_NULLB $ZONED_VM_ZNS; do
		n=$((n + 1))
		guest_one_device "$build" "$dev" || failed=$((failed + 1))
	done
	((n == 2)) || { echo "guest: expected 2 zoned devices, found $n"; failed=$((failed + 1)); }
	echo "guest: $((n - failed)) of $n devices passed"
	((failed == 0))
}

if [[ ${1:-} == --guest ]]; then
	guest_main "$2"
	exit
fi

# --- on the host -----------------------------------------------------------------------------

[[ $# == 1 && -d $1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 1; }
build=$(cd "$1" && pwd)
vm=$src/tools/zoned-vm
start=$SECONDS

if ! "$vm" --check >/dev/null 2>&1; then
	echo "zoned-guest: guests cannot run yet; trying: $vm --setup"
	"$vm" --setup
	if ! reason=$("$vm" --check 2>&1); then
		echo "SKIP: $reason"
		exit 77
	fi
fi
"$vm" --check
for f in "$build/tests/test_zdev" "$build/bin/mkfs.zlfs" "$build/bin/zlfs" "$build/bin/fsck.zlfs"; do
	[[ -x $f ]] || echo "zoned-guest: warning: $f is not built: that step will fail"
done

# The guest has its own /tmp and /run: share the tree from there if it lives in one.
share=()
for d in "$build" "$src"; do
	case $d/ in /tmp/* | /run/*) share+=(-w "$d") ;; esac
done

"$vm" --nullb "$NULLB" --zns "$ZNS" "${share[@]}" -C / -- bash "$here/zoned_guest.sh" --guest "$build"
rc=$?
echo "zoned-guest: guest exit status $rc, $((SECONDS - start)) s in all"
if ((rc != 0)); then
	echo "zoned-guest: FAILED"
	exit 1
fi
echo "zoned-guest: PASSED"
exit 0
