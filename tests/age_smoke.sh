#!/usr/bin/env bash
# age_smoke.sh BUILD_DIR - tools/age:
#   1. `tools/age --summary` on a hand-written CSV: the write floor, the read drop, the
#      iteration where each GC phase began and the zlfs/passthrough ratios must be the
#      figures worked out by hand below (runs even without /dev/fuse);
#   2. `tools/age --quick --fs zlfs,passthrough` on a tiny image against the binaries of
#      BUILD_DIR: a CSV with the expected columns and rows for zlfs and passthrough, a
#      non-empty PNG, a summary, and nothing left mounted;
#   3. `tools/age --quick --fs zlfs,passthrough-ext4` (tools/age's default baseline): rows for
#      the passthrough over a loop-mounted ext4 whose free space is its image's, the ratio,
#      and no mount, loop device or image left behind.
# Exit 77 (skipped) when /dev/fuse or gnuplot is missing (after part 1), or when
# passthrough-ext4 cannot run here: no loop devices and no fuse2fs (after part 2).
set -uo pipefail
BUILD=${1:?usage: age_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/age
rm -rf "$T"
mkdir -p "$T"
fail=0

# ---- 1. the summary of a known CSV ------------------------------------------------------------
cat >"$T/known.csv" <<'EOF'
fs,iter,elapsed_s,files,file_bytes,fill_s,test_bytes,write_MiBps,read_MiBps,free_bytes,free_pct,gc_phase,gc_phases_seen,waf,free_zones,gc_bytes_migrated,direct
zlfs,1,1.0,64,131072,0.1,8388608,100,200,900,90,no-gc,no-gc,1.000,50,0,1
zlfs,2,2.0,64,131072,0.1,8388608,110,210,800,80,no-gc,no-gc,1.000,40,0,1
zlfs,3,3.0,64,131072,0.1,8388608,90,190,700,70,normal,no-gc|normal,1.200,30,10,1
zlfs,4,4.0,64,131072,0.1,8388608,50,150,600,60,boosted,normal|boosted,1.500,20,20,1
zlfs,5,5.0,64,131072,0.1,8388608,60,130,500,50,boosted,boosted,2.000,10,30,1
passthrough,1,1.0,64,131072,0.1,8388608,80,100,900,90,,,,,,1
passthrough,2,2.0,64,131072,0.1,8388608,80,100,800,80,,,,,,1
passthrough,3,3.0,64,131072,0.1,8388608,80,100,700,70,,,,,,1
passthrough,5,5.0,64,131072,0.1,8388608,40,100,500,50,,,,,,1
passthrough,4,4.0,64,131072,0.1,8388608,40,100,600,60,,,,,,1
EOF
if ! "$REPO/tools/age" --summary "$T/known.csv" --first 3 --window 3 --out "$T/known-summary.csv" >"$T/known-summary.txt"; then
	echo "FAIL: tools/age --summary exited with an error"
	fail=1
fi
cat "$T/known-summary.txt"
KNOWN_SUMMARY=$T/known-summary.csv
# write floor: the slowest iteration; read drop: 1 - min / mean of the first 3 (200);
# drop at the end: 1 - mean(190, 150, 130) / 200; phases: first iteration they appear in;
# the median floor: the lowest median of 3 consecutive iterations (90, 50, 60 -> 60)
expect zlfs iterations 5
expect zlfs write_first_MiBps 100
expect zlfs write_floor_MiBps 50
expect zlfs write_floor_iter 4
expect zlfs write_floor_med3_MiBps 60
expect zlfs read_floor_med3_MiBps 150
expect passthrough write_floor_med3_MiBps 40
expect zlfs/passthrough ratio_write_floor_med_MiBps 1.5
expect zlfs read_first_MiBps 200
expect zlfs read_min_MiBps 130
expect zlfs read_drop_pct 35
expect zlfs read_drop_last_pct 21.667
expect zlfs phase_no_gc_began_iter 1
expect zlfs phase_normal_began_iter 3
expect zlfs phase_boosted_began_iter 4
expect zlfs waf_last 2
expect passthrough write_floor_MiBps 40
expect passthrough write_floor_iter 4
expect passthrough read_drop_pct 0
expect zlfs/passthrough ratio_write_floor_MiBps 1.25
expect zlfs/passthrough ratio_read_first_MiBps 2
expect zlfs/passthrough ratio_read_min_MiBps 1.3
if grep -q phase_foreground "$T/known-summary.csv"; then
	echo "FAIL: the summary reports a foreground phase the CSV does not have"
	fail=1
fi
grep -qE '^  zlfs +5 +100\.0 +50\.0 +4 +60\.0 +200\.0 +130\.0 +150\.0 +35\.0 +21\.7 +no-gc 1, normal 3, boosted 4$' \
	"$T/known-summary.txt" || { echo "FAIL: the printed summary line of zlfs is not as expected"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the summary of the known CSV"

# ---- 2. a quick run ---------------------------------------------------------------------------
smoke_needs gnuplot
OUT=$T/out
WORK=$T/work
smoke_run age "$T" "$OUT" "$WORK" --quick --fs zlfs,passthrough
smoke_left_mounted "$WORK" && fail=1
want=fs,iter,elapsed_s,files,file_bytes,fill_s,test_bytes,write_MiBps,read_MiBps,free_bytes,free_pct,gc_phase,gc_phases_seen,waf,free_zones,gc_bytes_migrated,direct,dev_write_MiBps,dev_read_MiBps,dev_waf,dev_gc_pages,dev_erases,dev_map_miss_pct
[[ $(head -1 "$OUT/age.csv") == "$want" ]] || { echo "FAIL: age.csv columns: $(head -1 "$OUT/age.csv")"; fail=1; }
for fs in zlfs passthrough; do
	n=$(awk -F, -v f=$fs '$1 == f && $2 ~ /^[0-9]+$/ && $8 > 0 && $9 > 0' "$OUT/age.csv" | wc -l)
	[[ $n == 4 ]] || { echo "FAIL: age.csv has $n good rows for $fs, expected 4"; fail=1; }
done
awk -F, '$1 == "zlfs" && ($12 == "" || $14 !~ /^[0-9.]+$/ || $15 !~ /^[0-9]+$/) { f = 1 } END { exit f }' \
	"$OUT/age.csv" || { echo "FAIL: zlfs rows lack the GC phase, WAF or free zones"; fail=1; }
[[ -s $OUT/age.png && $(head -c 4 "$OUT/age.png" | od -An -c | tr -d ' ') == 211PNG ]] ||
	{ echo "FAIL: no PNG plot"; fail=1; }
grep -q '^zlfs/passthrough,ratio_write_floor_MiBps,[0-9.]*,' "$OUT/summary.csv" ||
	{ echo "FAIL: summary.csv has no write-floor ratio"; fail=1; }
# the summary printed by the run is the one --summary computes from its CSV
"$REPO/tools/age" --summary "$OUT/age.csv" >"$T/resummary.txt"
cmp -s "$T/resummary.txt" "$OUT/summary.txt" || { echo "FAIL: the run's summary differs from --summary of its CSV"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: tools/age --quick: CSV, plot and summary"

# ---- 3. the baseline that ages: passthrough over an ext4 image -------------------------------
OUT=$T/out-ext4
WORK=$T/work-ext4
"$REPO/tools/age" --no-build --build "$BUILD" --workdir "$WORK" --out "$OUT" --quick \
	--fs zlfs,passthrough-ext4 >"$T/stdout-ext4" 2>"$T/stderr-ext4"
rc=$?
cat "$T/stdout-ext4"
if [[ $rc == 77 ]]; then
	echo "SKIP: passthrough-ext4: $(tail -1 "$T/stderr-ext4")"
	exit $((fail ? 1 : 77))
fi
if [[ $rc != 0 ]]; then
	tail -30 "$T/stderr-ext4"
	echo "FAIL: tools/age --quick --fs zlfs,passthrough-ext4 exited with $rc"
	exit 1
fi
smoke_left_mounted "$WORK" && fail=1
n=$(awk -F, '$1 == "passthrough-ext4" && $2 ~ /^[0-9]+$/ && $8 > 0 && $9 > 0' "$OUT/age.csv" | wc -l)
[[ $n == 4 ]] || { echo "FAIL: age.csv has $n good rows for passthrough-ext4, expected 4"; fail=1; }
# its free space is the 256 MiB image's (free_bytes / free_pct), not the host's
awk -F, '$1 == "passthrough-ext4" && !($11 > 0 && $10 * 100 / $11 <= 268435456 * 1.01) { f = 1 } END { exit f }' \
	"$OUT/age.csv" || { echo "FAIL: passthrough-ext4's free space is not its 256 MiB image's"; fail=1; }
grep -q '^zlfs/passthrough-ext4,ratio_write_floor_MiBps,[0-9.]*,' "$OUT/summary.csv" ||
	{ echo "FAIL: summary.csv has no zlfs/passthrough-ext4 write-floor ratio"; fail=1; }
grep -q '^losetup .*--direct-io=on' "$OUT/commands.txt" || grep -q '^fuse2fs ' "$OUT/commands.txt" ||
	{ echo "FAIL: commands.txt does not say how the ext4 image was mounted"; fail=1; }
if [[ -n $(losetup -j "$WORK/ext4.img" 2>/dev/null) ]]; then
	echo "FAIL: a loop device is left on $WORK/ext4.img"
	fail=1
fi
[[ ! -e $WORK/ext4.img && ! -e $WORK/ext4 ]] || { echo "FAIL: the ext4 image or its mount point is left behind"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: tools/age --quick --fs zlfs,passthrough-ext4: rows, capacity, cleanup"
exit $fail
