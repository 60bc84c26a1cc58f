#!/usr/bin/env bash
# unmount_wait.sh BUILD_DIR - tools that wait for a zlfs daemon finishing its unmount.
#   1. In a loop: mount, write, then `fusermount3 -u DIR && fsck.zlfs IMG` must exit 0 and
#      `fusermount3 -u DIR && zlfs IMG DIR` must mount, every time (the daemon is still
#      writing its last checkpoint when the unmount returns).
#   2. A device that is really in use fails at once, even with a long --wait: fsck.zlfs and
#      mkfs.zlfs on a mounted image (the message names the mount point), and fsck.zlfs on an
#      image another program holds (flock(1)); a second zlfs on it is a bind mount of the
#      first (as root; otherwise it fails at once too).
#   3. A daemon killed with -9 leaves no mark behind: fsck.zlfs goes on at once.
#   4. A daemon in the background whose mount rolled fsync'ed files forward after a power cut
#      exits once unmounted (the recovery's write-buffer threads once outlived the fork as
#      waiters the child counted, and the exit waited on them for ever).
# Exit 77 (skipped) without /dev/fuse or fusermount3.
set -uo pipefail
BUILD=${1:?usage: unmount_wait.sh BUILD_DIR}
B=$BUILD/bin
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/unmount-wait
ROUNDS=${ZLFS_UNMOUNT_ROUNDS:-15}
[[ -c /dev/fuse ]] && command -v fusermount3 >/dev/null || { echo "SKIP: no /dev/fuse"; exit 77; }
rm -rf "$T"
mkdir -p "$T/mnt"
IMG=$T/d.img MNT=$T/mnt
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cleanup() { umount "$T/mnt2" 2>/dev/null; fusermount3 -u "$MNT" 2>/dev/null; }
trap cleanup EXIT

"$B/zlfs-emu" create "$IMG" --size 4G --zone-size 64M --max-open 14 --max-active 14 >/dev/null &&
	"$B/mkfs.zlfs" -q "$IMG" || { echo "FAIL: cannot make the image"; exit 1; }

# write enough that the daemon's last checkpoint takes a while (over the same few files, so
# the image never fills)
dirty() {
	dd if=/dev/urandom of="$MNT/f$(($2 % 4))" bs=1M count=8 status=none ||
		bad "round $1: write failed"
	mkdir -p "$MNT/d$1" && touch "$MNT/d$1/"{a,b,c,d,e,f,g,h} || bad "round $1: creates failed"
}

# ---- 1. unmount then fsck, unmount then mount, in a loop -----------------------------------
"$B/zlfs" "$IMG" "$MNT" || { echo "FAIL: first mount"; exit 1; }
waited=0
for ((i = 0; i < ROUNDS; i++)); do
	dirty "$i" $((2 * i))
	fusermount3 -u "$MNT" && "$B/fsck.zlfs" "$IMG" >"$T/fsck.out" 2>"$T/fsck.err"
	rc=$?
	[[ $rc == 0 ]] || { bad "round $i: umount && fsck.zlfs exited $rc"; cat "$T/fsck.err"; }
	grep -q "waiting up to" "$T/fsck.err" && waited=$((waited + 1))
	"$B/zlfs" "$IMG" "$MNT" || bad "round $i: mount after fsck"
	dirty "$i.2" $((2 * i + 1))
	fusermount3 -u "$MNT" && "$B/zlfs" "$IMG" "$MNT" 2>"$T/mount.err"
	rc=$?
	[[ $rc == 0 ]] || { bad "round $i: umount && zlfs exited $rc"; cat "$T/mount.err"; }
	grep -q "waiting up to" "$T/mount.err" && waited=$((waited + 1))
done
[[ -f $MNT/f0 && -f $MNT/d$((ROUNDS - 1)).2/h ]] || bad "files written in the loop are missing"
echo "loop: $ROUNDS rounds, the tool waited for the daemon in $waited of $((2 * ROUNDS)) steps"
[[ $fail == 0 ]] && echo "PASS: umount && fsck.zlfs, umount && zlfs, $ROUNDS times each"

# ---- 2. really in use: fail at once, whatever --wait says ------------------------------------
at_once() { # WHAT EXPECTED_RC PATTERN CMD...: CMD exits EXPECTED_RC within 10 s, saying PATTERN
	local what=$1 want=$2 pat=$3 t0 t1 rc
	shift 3
	t0=$(date +%s)
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	t1=$(date +%s)
	[[ $rc == "$want" ]] || bad "$what: exit $rc, expected $want"
	((t1 - t0 < 10)) || bad "$what: took $((t1 - t0)) s with --wait 60: it waited"
	cat "$T/out" "$T/err" | grep -q "$pat" || { bad "$what: no '$pat' in:"; cat "$T/out" "$T/err"; }
}
at_once "fsck.zlfs on a mounted image" 8 "is mounted on $MNT" "$B/fsck.zlfs" --wait 60 "$IMG"
at_once "mkfs.zlfs on a mounted image" 1 "is mounted on $MNT" "$B/mkfs.zlfs" -f --wait 60 "$IMG"
mkdir -p "$T/mnt2"
if [[ $EUID == 0 ]]; then # a second mount is a bind mount of the first, the same daemon
	"$B/zlfs" -o wait=60 "$IMG" "$T/mnt2" 2>"$T/err" || { bad "a second zlfs: exit $?"; cat "$T/err"; }
	[[ $(stat -c %i "$T/mnt2") == $(stat -c %i "$MNT") ]] && grep -q " $T/mnt2 " /proc/self/mountinfo ||
		bad "a second zlfs on a mounted image: $T/mnt2 does not show it"
	umount "$T/mnt2" || bad "umount of the second mount"
else
	at_once "a second zlfs on a mounted image" 1 "is mounted on $MNT" "$B/zlfs" -o wait=60 "$IMG" "$T/mnt2"
fi
fusermount3 -u "$MNT"
sleep 0.5
"$B/fsck.zlfs" --wait 60 "$IMG" >/dev/null || bad "fsck.zlfs after the unmount"
exec 9<"$IMG" # this shell holds the image as another program would
flock -x 9
at_once "fsck.zlfs on an image another program holds" 8 "in use" "$B/fsck.zlfs" --wait 60 "$IMG"
exec 9<&-
[[ $fail == 0 ]] && echo "PASS: a mounted or held image fails at once"

# ---- 3. a killed daemon leaves no mark -------------------------------------------------------
"$B/zlfs" -f "$IMG" "$MNT" 2>/dev/null &
daemon=$!
for ((i = 0; i < 100; i++)); do
	grep -q " $MNT " /proc/self/mountinfo && break
	sleep 0.1
done
{ kill -9 "$daemon" && wait "$daemon"; } 2>/dev/null
fusermount3 -u "$MNT" 2>/dev/null
at_once "fsck.zlfs after kill -9 of the daemon" 0 "clean" "$B/fsck.zlfs" -n --wait 60 "$IMG"
[[ $fail == 0 ]] && echo "PASS: no mark outlives a killed daemon"

# ---- 4. a recovering daemon in the background exits after its unmount -----------------------
"$B/zlfs" -f -o dev_direct "$IMG" "$MNT" 2>/dev/null &
daemon=$!
for ((i = 0; i < 100; i++)); do
	grep -q " $MNT " /proc/self/mountinfo && break
	sleep 0.1
done
for i in 1 2 3; do # fsync'ed, no checkpoint after: the next mount rolls them forward
	head -c 262144 /dev/urandom >"$T/r$i"
	dd if="$T/r$i" of="$MNT/r$i" bs=64k conv=fsync status=none || bad "write r$i"
done
{ kill -9 "$daemon" && wait "$daemon"; } 2>/dev/null
fusermount3 -u "$MNT" 2>/dev/null
"$B/zlfs-emu" powercut "$IMG" >/dev/null || bad "zlfs-emu powercut"
"$B/zlfs" "$IMG" "$MNT" 2>"$T/recover.err" || { bad "mount after the power cut"; cat "$T/recover.err"; }
grep -q "recovered" "$T/recover.err" || bad "the mount after the power cut recovered nothing: $(cat "$T/recover.err")"
pid=$(pgrep -f -x "$B/zlfs $IMG $MNT")
for i in 1 2 3; do cmp -s "$T/r$i" "$MNT/r$i" || bad "r$i (fsync'ed) differs after the cut"; done
fusermount3 -u "$MNT" || bad "unmount after the recovery"
for ((i = 0; i < 300 && ${pid:-0} > 0; i++)); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
	bad "the daemon (pid $pid) is still running 30 s after its unmount"
	kill -9 "$pid"
fi
[[ -n $pid ]] || bad "no daemon found for $IMG"
"$B/fsck.zlfs" -n --wait 60 "$IMG" >/dev/null || bad "fsck.zlfs after the recovering daemon's unmount"
[[ $fail == 0 ]] && echo "PASS: a daemon that recovered in the background exits after its unmount"

[[ $fail == 0 ]] && echo "4 passed, 0 failed" || echo "FAIL"
exit $fail
