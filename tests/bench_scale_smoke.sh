#!/usr/bin/env bash
# bench_scale_smoke.sh BUILD_DIR - tools/bench-scale:
#   1. `tools/bench-scale --summary` on a hand-written CSV: the verdicts on the issue's targets
#      must be the ones worked out by hand (met, not met, not judged below 4 TiB or 1M files);
#   2. `tools/bench-scale --quick` (a 16 GiB sparse image, 4000 files in a tree, 2000 in one
#      directory) against the binaries of BUILD_DIR: every metric in the CSV has a positive
#      number (fsck exit codes 0), the image is gone and nothing is left mounted.
# Exit 77 (skipped) when /dev/fuse is missing (after part 1).
set -uo pipefail
BUILD=${1:?usage: bench_scale_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-scale
rm -rf "$T"
mkdir -p "$T"
fail=0

# ---- 1. the summary of a known CSV ------------------------------------------------------------
{
	echo "image,image_bytes,metric,value,unit"
	echo "4T,4398046511104,files,1100000,files"
	echo "4T,4398046511104,rss_mib_full,100.0,MiB"         # met (<= 128)
	echo "4T,4398046511104,mount_clean_s,1.5,s"            # not met (<= 1)
	echo "4T,4398046511104,mount_powercut_s,2.5,s"         # met (<= 3)
	echo "4T,4398046511104,tree_create_ratio,0.9,x"        # met (>= 0.8)
	echo "4T,4398046511104,tree_stat_ratio,0.5,x"          # not met
	echo "512G,549755813888,files,1100000,files"
	echo "512G,549755813888,rss_mib_full,200.0,MiB"        # not judged: not 4 TiB
	echo "512G,549755813888,tree_stat_ratio,0.85,x"        # met
	echo "16G,17179869184,files,6000,files"
	echo "16G,17179869184,tree_create_ratio,0.2,x"         # not judged: not 1M files
} >"$T/known.csv"
"$REPO/tools/bench-scale" --summary "$T/known.csv" >"$T/known.txt" ||
	{ echo "FAIL: tools/bench-scale --summary exited with an error"; fail=1; }
cat "$T/known.txt"
verdict() { # PATTERN: a verdict line matches it
	grep -Eq "$1" "$T/known.txt" || { echo "FAIL: no verdict line matching '$1'"; fail=1; }
}
verdict '^4T daemon RSS.*: 100.0 MiB \(met'
verdict '^4T clean mount: 1.5 s \(NOT met'
verdict '^4T mount after kill -9 and a power cut: 2.5 s \(met'
verdict '^4T tree create rate.*: 0.9 x \(met'
verdict '^4T tree stat rate.*: 0.5 x \(NOT met'
verdict '^512G tree stat rate.*: 0.85 x \(met'
grep -q '^512G daemon RSS' "$T/known.txt" && { echo "FAIL: RSS judged below 4 TiB"; fail=1; }
grep -q '^16G ' "$T/known.txt" && { echo "FAIL: a ratio judged below 1M files"; fail=1; }
grep -q '^| rss_mib_full | MiB | 100.0 | 200.0 | - |' "$T/known.txt" ||
	{ echo "FAIL: the table row of rss_mib_full"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the summary of the known CSV"

# ---- 2. a quick run ---------------------------------------------------------------------------
[[ -e /dev/fuse ]] || { echo "/dev/fuse is missing: skipped"; exit 77; }
smoke_run bench-scale "$T" "$T/out" "$T/work" --quick
smoke_left_mounted "$T/work" && fail=1
[[ -e $T/work/scale.img ]] && { echo "FAIL: the image was not deleted"; fail=1; }
CSV=$T/out/scale.csv
[[ $(head -1 "$CSV") == "image,image_bytes,metric,value,unit" ]] || { echo "FAIL: CSV header"; fail=1; }
for m in zones mount_empty_s rss_mib_empty tree_create_rate_first tree_create_rate_last \
	tree_stat_rate_first tree_stat_rate_last tree_create_ratio tree_stat_ratio \
	dir_create_rate_first dir_create_rate_last dir_stat_rate_first dir_stat_rate_last \
	rss_mib_full rss_peak_mib_full files mount_clean_s rss_mib_after_mount fsck_clean_s \
	mount_powercut_s fsck_after_powercut_s; do
	v=$(awk -F, -v m="$m" '$1 == "16G" && $3 == m { print $4 }' "$CSV")
	awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || { echo "FAIL: $m is '$v', not a positive number"; fail=1; }
done
for m in fsck_clean_exit fsck_after_powercut_exit; do
	v=$(awk -F, -v m="$m" '$1 == "16G" && $3 == m { print $4 }' "$CSV")
	[[ $v == 0 ]] || { echo "FAIL: $m is '$v'"; fail=1; }
done
[[ $(awk -F, '$3 == "files" { print $4 }' "$CSV") == 6000 ]] || { echo "FAIL: files != 6000"; fail=1; }
grep -q '^| tree_create_ratio | x | ' "$T/out/summary.md" || { echo "FAIL: no summary table"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the quick run"
[[ $fail == 0 ]] && echo "2 passed, 0 failed"
exit $fail
