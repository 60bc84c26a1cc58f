#!/bin/bash
# conv_guest.sh - the conventional-mode guest test: kernel F2FS on the emulator's FTL model,
# served by zlfs-emu serve-nbd, in one QEMU guest (tools/zoned-vm).
#
# Owns: the conventional image and the server on the host, what runs in the guest, and the
# checks on the server's statistics afterwards.
#   1. QEMU's NBD client (the guest's /dev/vda, the way tools/age --guest conv-model runs):
#      mkfs.f2fs (its discard reaches the server as trims), mount, copy a tree in, unmount,
#      mount again, compare, fsck.f2fs.
#   2. The kernel's own client, when nbd-client is installed: a second server inside the
#      guest on a small image, nbd-client -u with 4 KiB blocks, mkfs.f2fs, mount, write,
#      unmount, compare, nbd-client -d.
# Then, on the host: the server stopped cleanly and its statistics file counts the writes,
# flushes and trims the guest sent.
# May call: tools/zoned-vm, the build's zlfs-emu, mkfs.f2fs, fsck.f2fs, nbd-client.
#
# usage: tests/conv_guest.sh BUILD_DIR
# Exit: 0 passed, 1 a failure, 77 skipped (no qemu, kernel, or mkfs.f2fs here).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(dirname "$here")

# --- inside the guest ------------------------------------------------------------------------

check_f2fs() { # DEV MNT: F2FS on DEV, a tree copied in and found again after a remount
	local dev=$1 mnt=$2
	mkfs.f2fs -f "$dev" >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; return 1; }
	mkdir -p "$mnt"
	mount -t f2fs "$dev" "$mnt" || return 1
	cp -a "$src/fs" "$mnt/tree" && dd if=/dev/urandom of=/tmp/big bs=1M count=8 status=none &&
		cp /tmp/big "$mnt/big" && sync || { umount "$mnt"; return 1; }
	umount "$mnt" && mount -t f2fs "$dev" "$mnt" || return 1
	diff -r "$src/fs" "$mnt/tree" && cmp /tmp/big "$mnt/big"
	local same=$?
	umount "$mnt" || return 1
	((same == 0)) || { echo "contents differ after the remount"; return 1; }
	fsck.f2fs "$dev" >/tmp/fsck.log 2>&1 || { cat /tmp/fsck.log; return 1; }
}

guest_kernel_nbd() { # BUILD: the kernel's NBD client on a server in the guest
	local bin=$1/bin rc=0 pid
	"$bin/zlfs-emu" create /tmp/k.img --mode conventional --size 256M --timing block=256K >/dev/null || return 1
	"$bin/zlfs-emu" serve-nbd /tmp/k.img /tmp/k.sock --stats /tmp/k.json 2>/tmp/k.log & pid=$!
	for _ in $(seq 100); do [[ -S /tmp/k.sock ]] && break; sleep 0.1; done
	modprobe nbd || { kill "$pid"; return 1; }
	nbd-client -u /tmp/k.sock /dev/nbd0 -b 4096 >/tmp/nbd-client.log 2>&1 ||
		{ cat /tmp/nbd-client.log; kill "$pid"; return 1; }
	check_f2fs /dev/nbd0 /tmp/mk || rc=1
	nbd-client -d /dev/nbd0 >/dev/null 2>&1
	kill "$pid"
	wait "$pid" || rc=1
	grep -q '"host_trims": [1-9]' /tmp/k.json || { echo "kernel client: no trim reached the server"; rc=1; }
	return $rc
}

guest_main() { # BUILD
	local build=$1 failed=0 r1 r2="kernel nbd client: SKIP (nbd-client is not installed)"
	echo "guest: kernel $(uname -r), NBD disks: $ZONED_VM_NBD"
	if check_f2fs "${ZONED_VM_NBD%% *}" /tmp/mq; then r1="qemu nbd client: F2FS PASS"
	else r1="qemu nbd client: F2FS FAIL"; failed=1; fi
	if command -v nbd-client >/dev/null; then
		if guest_kernel_nbd "$build"; then r2="kernel nbd client: F2FS PASS"
		else r2="kernel nbd client: F2FS FAIL"; failed=1; fi
	fi
	echo "RESULT $r1; $r2"
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
command -v mkfs.f2fs >/dev/null || { echo "SKIP: mkfs.f2fs is not installed (f2fs-tools)"; exit 77; }
if ! "$vm" --check >/dev/null 2>&1; then
	"$vm" --setup
	reason=$("$vm" --check 2>&1) || { echo "SKIP: $reason"; exit 77; }
fi
work=${ZLFS_TEST_TMP:-/tmp}/conv-guest
rm -rf "$work" && mkdir -p "$work" || exit 1
img=$work/conv.img sock=$work/conv.sock stats=$work/conv.json
"$build/bin/zlfs-emu" create "$img" --mode conventional --size 256M --timing block=1M >/dev/null || exit 1
"$build/bin/zlfs-emu" serve-nbd "$img" "$sock" --stats "$stats" 2>"$work/server.log" & server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done

share=()
for d in "$build" "$src"; do
	case $d/ in /tmp/* | /run/*) share+=(-w "$d") ;; esac
done
"$vm" --nbd "$sock" --no-devices -M nbd "${share[@]}" -C / -- bash "$here/conv_guest.sh" --guest "$build"
rc=$?
kill "$server"
wait "$server"
src_rc=$?
trap - EXIT
fail=0
((rc == 0)) || { echo "conv-guest: guest exit status $rc"; fail=1; }
((src_rc == 0)) || { echo "conv-guest: the server exited with $src_rc:"; cat "$work/server.log"; fail=1; }
for k in host_writes host_flushes host_trims host_reads; do
	grep -q "\"$k\": [1-9]" "$stats" || { echo "conv-guest: the server counted no $k"; fail=1; }
done
echo "conv-guest: $((SECONDS - start)) s in all"
rm -rf "$work"
((fail == 0)) && { echo "conv-guest: PASSED"; exit 0; }
echo "conv-guest: FAILED"
exit 1
