#!/usr/bin/env bash
# bench_smallfiles_smoke.sh BUILD_DIR - tools/bench-smallfiles --quick against the binaries of
# BUILD_DIR: fs_mark (with and without fsync) and PostMark on zlfs, the passthrough over ext4
# and ext4; every benchmark has a positive figure on every filesystem and a ratio, zlfs's fsck
# was clean (the tool stops otherwise), nothing is left mounted. Exit 77 (skipped) without
# /dev/fuse, fs_mark, postmark, mkfs.ext4 or loop devices.
set -uo pipefail
BUILD=${1:?usage: bench_smallfiles_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
smoke_needs fs_mark postmark mkfs.ext4
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-smallfiles
rm -rf "$T"
mkdir -p "$T/work"
fail=0

"$REPO/tools/bench-smallfiles" --no-build --build "$BUILD" --workdir "$T/work" --out "$T/out" --quick \
	>"$T/stdout" 2>"$T/stderr"
rc=$?
cat "$T/stdout"
[[ $rc == 77 ]] && { tail -3 "$T/stderr"; echo "SKIP"; exit 77; }
[[ $rc == 0 ]] || { tail -30 "$T/stderr"; echo "FAIL: tools/bench-smallfiles --quick exited with $rc"; exit 1; }
head -1 "$T/out/summary.txt" | grep -qE '^bench +zlfs +passthrough-ext4 +ext4 +zlfs/passthrough-ext4 +zlfs/ext4$' ||
	{ echo "FAIL: summary header: $(head -1 "$T/out/summary.txt")"; fail=1; }
for b in fsmark fsmark0 postmark; do
	awk -v b="$b" '$1 == b && NF == 6 { for (i = 2; i <= 6; i++) if (!($i > 0)) exit 1; ok = 1 } END { exit !ok }' \
		"$T/out/summary.txt" || { echo "FAIL: $b: $(grep "^$b " "$T/out/summary.txt")"; fail=1; }
done
[[ $(ls "$T"/out/fsck-zlfs-*.txt 2>/dev/null | wc -l) == 3 ]] || { echo "FAIL: not three fsck logs"; fail=1; }
smoke_left_mounted "$T/work" && fail=1
exit $fail
