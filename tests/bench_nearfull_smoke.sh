#!/usr/bin/env bash
# bench_nearfull_smoke.sh BUILD_DIR - tools/bench-nearfull, one short round against the
# binaries of BUILD_DIR: it exits 0 (fsck clean), its CSV has one row with every column, files
# got written, the counts of refusals are whole numbers, the WAF is at least 1, and the
# table names the build. Exit 77 (skipped) without /dev/fuse.
set -uo pipefail
BUILD=${1:?usage: bench_nearfull_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-nearfull
rm -rf "$T"
mkdir -p "$T/work"
[[ -c /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$REPO/tools/bench-nearfull" --versions "smoke=$BUILD" --rounds 1 --seconds 6 --writers 2 \
	--work "$T/work" --csv "$T/nearfull.csv" >"$T/out.txt" 2>&1 || bad "bench-nearfull exited $?: $(tail -3 "$T/out.txt")"
head -1 "$T/nearfull.csv" | grep -qx 'build,round,files,create_room,create_honest,write_room,write_honest,user_mib,gc_mib,waf,fsck' ||
	bad "CSV header: $(head -1 "$T/nearfull.csv")"
[[ $(wc -l <"$T/nearfull.csv") == 2 ]] || bad "CSV rows: $(wc -l <"$T/nearfull.csv")"
awk -F, 'NR == 2 { ok = $1 == "smoke" && $2 == 1 && $3 > 0 && $11 == "clean" && $10 >= 1;
	for (i = 4; i <= 7; i++) ok = ok && $i ~ /^[0-9]+$/; exit !ok }' "$T/nearfull.csv" ||
	bad "CSV row: $(sed -n 2p "$T/nearfull.csv")"
grep -q '^smoke ' "$T/out.txt" || bad "no table row for the build: $(tail -3 "$T/out.txt")"
grep -qs zlfs /proc/mounts && grep -q "$T" /proc/mounts && bad "left mounted"
cat "$T/out.txt" | tail -3
exit $fail
