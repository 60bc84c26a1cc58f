#!/usr/bin/env bash
# bench_lanes_smoke.sh BUILD_DIR - tools/bench-lanes, small, against the binaries of BUILD_DIR:
# its CSV has the 8 rows of one round with every column, and, since the figures are simulated
# device time (deterministic), on the model whose zones live on one die the lanes (10 logs)
# give 4 writers at least 1.5x one writer while one warm data log (7 logs) gives them under
# 1.2x; on zones striped over every die, lanes cost 4 writers nothing (within 10%). Exit 77
# (skipped) without /dev/fuse or fio.
set -uo pipefail
BUILD=${1:?usage: bench_lanes_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
smoke_needs fio
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-lanes
rm -rf "$T"
mkdir -p "$T/work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

smoke_run bench-lanes "$T" "$T/out" "$T/work" --total 256 --image-size 2G
CSV=$T/out/lanes.csv
head -1 "$CSV" | grep -qx 'model,logs,writers,round,bytes,sim_ns,mbs' || bad "CSV header: $(head -1 "$CSV")"
[[ $(wc -l <"$CSV") == 9 ]] || bad "CSV rows: $(wc -l <"$CSV")"
ratio() { awk -F, -v m="$1" -v l="$2" '$1 == m && $2 == l { v[$3] = $7 }
	END { if (v[1] > 0) printf "%.2f", v[4] / v[1]; else print "none" }' "$CSV"; }
r7=$(ratio zone_dies=1 7); r10=$(ratio zone_dies=1 10); s7=$(ratio ufs40 7); s10=$(ratio ufs40 10)
echo "4 writers / 1: one-die zones: 7 logs $r7, 10 logs $r10; striped zones: 7 logs $s7, 10 logs $s10"
awk -v a="$r10" 'BEGIN { exit !(a >= 1.5) }' || bad "lanes on one-die zones: $r10 < 1.5"
awk -v a="$r7" 'BEGIN { exit !(a < 1.2) }' || bad "one data log on one-die zones: $r7 >= 1.2 (the model no longer limits a zone?)"
awk -v a="$s10" -v b="$s7" 'BEGIN { exit !(a >= 0.9 * b) }' || bad "lanes on striped zones: $s10 against $s7"
smoke_left_mounted "$T/work" && fail=1
exit $fail
