# progs_lib.sh - what the tests that run outside programs on a mounted image share (sourced by
# tests/stress_ng.sh and tests/outside_progs.sh). The test sets BIN (the build's bin/), T (its
# directory: the image T/s.img, the mount point T/mnt, the daemon's log T/daemon.log),
# MOUNT_OPTS (an array of the daemon's extra options) and fail=0; these set daemon and fail.

mount_fs() { # the daemon in the background on T/s.img; exits the test if it does not mount
	"$BIN/zlfs" -f "${MOUNT_OPTS[@]}" "$T/s.img" "$T/mnt" 2>>"$T/daemon.log" &
	daemon=$!
	for _ in $(seq 100); do mountpoint -q "$T/mnt" && return 0; sleep 0.1; done
	echo "FAIL: no mount"; tail -5 "$T/daemon.log"; exit 1
}

# The daemon's end: its exit status, and no sanitizer report whatever the status.
daemon_done() { # WHAT EXPECTED_STATUS
	local st
	wait "$daemon"
	st=$?
	if [[ $2 == 0 && $st != 0 ]]; then
		echo "FAIL: $1: the daemon exited with $st"; fail=1
	fi
	if grep -qE "Sanitizer|runtime error:" "$T/daemon.log"; then
		echo "FAIL: $1: sanitizer report in the daemon's log"; grep -A20 -m1 -E "Sanitizer|runtime error:" "$T/daemon.log"; fail=1
	fi
}

fsck_clean() { # WHAT: fsck.zlfs -n must find T/s.img clean
	if "$BIN/fsck.zlfs" -n "$T/s.img" >"$T/fsck.log" 2>&1; then
		echo "$1: fsck clean ($(tail -2 "$T/fsck.log" | head -1))"
	else
		echo "FAIL: $1: fsck"; tail -10 "$T/fsck.log"; fail=1
	fi
}

# power_cut WHAT PGID: the daemon killed (-9) under a running program (PGID: its own process
# group, killed next), every unflushed write dropped (zlfs-emu powercut), the image mounted again
power_cut() {
	kill -9 "$daemon"
	daemon_done "$1, the cut run" 9
	kill -9 -- -"$2" 2>/dev/null
	wait "$2" 2>/dev/null
	fusermount3 -uz "$T/mnt" 2>/dev/null
	"$BIN/zlfs-emu" powercut "$T/s.img" >/dev/null || { echo "FAIL: $1: powercut"; exit 1; }
	mount_fs
}
