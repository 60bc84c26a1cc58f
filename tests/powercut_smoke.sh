#!/usr/bin/env bash
# powercut_smoke.sh BUILD_DIR - power cuts in the daemon's ordinary write path: the image
# written without a write log, so the write buffer's runs of slots reach the emulator as one
# vectored write each (test_crash's logged images take them piece by piece). zlfs-stress
# powercut: 12 rounds of 4 writers near 85% full, each ended by kill -9 and a power cut that
# keeps a random prefix of the unflushed writes (sometimes one torn); every fsync'ed file must
# be whole after recovery, and fsck.zlfs -n clean. Once buffered, once with -o dev_direct.
# Exit 77 (skipped) without /dev/fuse.
set -uo pipefail
BUILD=${1:?usage: powercut_smoke.sh BUILD_DIR}
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/powercut
BIN=$BUILD/bin
[[ -c /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
fail=0
for mode in buffered direct; do
	rm -rf "$T"
	mkdir -p "$T/mnt"
	"$BIN/zlfs-emu" create "$T/pc.img" --size 256M --zone-size 8M --max-open 14 \
		--max-active 14 >/dev/null && "$BIN/mkfs.zlfs" -q "$T/pc.img" || { echo "FAIL: mkfs"; exit 1; }
	"$BIN/zlfs-stress" powercut "$T/pc.img" "$T/mnt" --bin "$BIN" --rounds 12 --writers 4 \
		--fill 85 --seed 11 $([[ $mode == direct ]] && echo --direct) >"$T/log" 2>&1
	rc=$?
	fusermount3 -u "$T/mnt" 2>/dev/null
	grep -E '^round|^powercut' "$T/log" | tail -2
	if [[ $rc != 0 ]]; then
		echo "FAIL: powercut ($mode) exited $rc:"
		tail -15 "$T/log"
		fail=1
	fi
	"$BIN/fsck.zlfs" -n "$T/pc.img" >/dev/null 2>&1 || { echo "FAIL: fsck after the last round ($mode)"; fail=1; }
done
exit $fail
