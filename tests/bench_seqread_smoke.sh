#!/usr/bin/env bash
# bench_seqread_smoke.sh BUILD_DIR - tools/bench-seqread --quick against the binaries of
# BUILD_DIR: its CSV has a row for zlfs and one for the disk, with positive rates, and zlfs read
# the file from the device about once (at most 1.25 times: the read-ahead's requests wait for
# each other's extensions instead of reading them again). Exit 77 (skipped) without /dev/fuse.
set -uo pipefail
BUILD=${1:?usage: bench_seqread_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
smoke_needs python3
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-seqread
rm -rf "$T"
mkdir -p "$T/work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

smoke_run bench-seqread "$T" "$T/out" "$T/work" --quick
CSV=$T/out/seqread.csv
head -1 "$CSV" | grep -qx 'version,round,mibps,device_per_file' || bad "CSV header: $(head -1 "$CSV")"
awk -F, '$1 == "zlfs" && $3 > 0 && $4 > 0.9 && $4 <= 1.25 { ok = 1 } END { exit !ok }' "$CSV" ||
	bad "zlfs row: $(grep '^zlfs,' "$CSV")"
awk -F, '$1 == "disk" && $3 > 0 { ok = 1 } END { exit !ok }' "$CSV" || bad "disk row: $(grep '^disk,' "$CSV")"
grep -q '/ disk' "$T/stdout" || bad "no summary table"
smoke_left_mounted "$T/work" && fail=1
exit $fail
