#!/usr/bin/env bash
# bench_parallel_smoke.sh BUILD_DIR - tools/bench-parallel:
#   1. `tools/bench-parallel --summary` on a hand-written CSV: each ratio must be the median of
#      the per-round loaded/base ratios worked out by hand below, a pair with a side missing
#      gives no ratio, and the harness rows are no version (runs even without /dev/fuse or fio);
#   2. `tools/bench-parallel --quick` against the binaries of BUILD_DIR: every figure of every
#      measurement in parallel.csv, every ratio in summary.csv equal to loaded/base recomputed
#      here from parallel.csv, a PNG, the commit in commands.txt, nothing left mounted or running.
# Exit 77 (skipped) when /dev/fuse, fio or gnuplot is missing (after part 1).
set -uo pipefail
BUILD=${1:?usage: bench_parallel_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-parallel
rm -rf "$T"
mkdir -p "$T"
fail=0
COLS=version,round,measure,case,metric,value,unit,note

# ratio VERSION NAME SUMMARY_CSV: the value of one ratio (summary.csv: version,ratio,base,loaded,value,...)
ratio() { awk -F, -v v="$1" -v n="$2" '$1 == v && $2 == n { print $5 }' "$3"; }
close_to() { awk -v v="$1" -v e="$2" 'BEGIN { exit !(v != "" && v - e < 0.002 && e - v < 0.002) }'; }

# ---- 1. the summary of a known CSV ------------------------------------------------------------
cat >"$T/known.csv" <<EOF
$COLS
-,1,harness,one,ops,40000,ops/s,
-,1,harness,four,ops,90000,ops/s,
a,1,writers,one,MiBps,100,MiB/s,
a,1,writers,four,MiBps,150,MiB/s,
a,2,writers,one,MiBps,200,MiB/s,
a,2,writers,four,MiBps,260,MiB/s,
a,3,writers,one,MiBps,120,MiB/s,
a,3,writers,four,MiBps,240,MiB/s,
a,1,read-writer,idle,p99_us,100,us,
a,1,read-writer,writer,p99_us,250,us,
a,1,read-writer,idle,iops,1000,IOPS,
a,1,read-writer,writer,iops,500,IOPS,
a,1,read-gc,idle,iops,1000,IOPS,
a,1,read-gc,writer,iops,800,IOPS,
a,1,read-gc,gc,iops,900,IOPS,
a,1,read-gc,idle,p99_us,100,us,
a,1,read-gc,writer,p99_us,150,us,
a,1,read-gc,gc,p99_us,120,us,
a,1,stat-cp,idle,p99_us,50,us,
a,1,stat-cp,checkpoint,p99_us,75,us,
a,1,stat-cp,idle,p999_us,400,us,
a,1,stat-cp,checkpoint,p999_us,100000,us,
a,1,stat-cp,idle,rate,20000,stats/s,
a,1,stat-cp,checkpoint,rate,2500,stats/s,
a,1,stat-cp,change,p99_us,60,us,
b,1,creates,one,ops,1000,ops/s,
b,1,creates,four,ops,2500,ops/s,
b,1,writers,one,MiBps,100,MiB/s,
EOF
KNOWN=$T/known-summary.csv
"$REPO/tools/bench-parallel" --summary "$T/known.csv" --out "$KNOWN" >"$T/known-summary.txt" ||
	{ echo "FAIL: tools/bench-parallel --summary exited with an error"; fail=1; }
cat "$T/known-summary.txt"
expect_ratio() { # VERSION NAME VALUE
	local v
	v=$(ratio "$1" "$2" "$KNOWN")
	close_to "$v" "$3" || { echo "FAIL: summary $1 $2 = '$v', expected $3"; fail=1; }
}
# writers of a: per-round ratios 1.5, 1.3, 2.0 -> 1.5 (the ratio of the medians would be 2.0)
expect_ratio a writers_4_vs_1 1.5
expect_ratio a read_p99_seqwriter 2.5
expect_ratio a read_iops_seqwriter 0.5
expect_ratio a read_iops_gc 0.9
expect_ratio a read_p99_gc 1.2
expect_ratio a read_iops_gc_vs_writer 1.125
expect_ratio a read_p99_gc_vs_writer 0.8
expect_ratio a stat_p99_checkpoint 1.5
expect_ratio a stat_p99_changes 1.2
expect_ratio a stat_p999_checkpoint 250
expect_ratio a stat_rate_checkpoint 0.125
expect_ratio b creates_4_vs_1 2.5
awk -F, '$1 == "a" && $2 == "writers_4_vs_1" && $3 == 120 && $4 == 240 && $7 == 3 { f = 1 } END { exit !f }' "$KNOWN" ||
	{ echo "FAIL: writers of a: base and loaded are not the medians 120 and 240 of 3 rounds"; fail=1; }
[[ -z $(ratio b writers_4_vs_1 "$KNOWN") ]] || { echo "FAIL: b has a writers ratio without a loaded figure"; fail=1; }
! awk -F, '$1 == "-"' "$KNOWN" | grep -q . || { echo "FAIL: the harness rows were taken for a version"; fail=1; }
grep -qE 'creates.*b +1000\.0 +2500\.0 +2\.500x +>= 1\.5: met' "$T/known-summary.txt" ||
	{ echo "FAIL: the printed line of b's creates is not as expected"; fail=1; }
grep -qE 'QD1 4K read p99, sequential writer / idle +a .* 2\.500x +<= 2: not met' "$T/known-summary.txt" ||
	{ echo "FAIL: the printed line of a's read p99 beside a writer is not as expected"; fail=1; }
grep -qE 'harness: .* 1 process 40000 ops/s, 4 processes 90000 ops/s, 4/1 2\.250x' "$T/known-summary.txt" ||
	{ echo "FAIL: the harness line is not as expected"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the summary of the known CSV"

# ---- 2. a quick run ---------------------------------------------------------------------------
smoke_needs fio gnuplot
OUT=$T/out
WORK=$T/work
smoke_run bench-parallel "$T" "$OUT" "$WORK" --quick
smoke_left_mounted "$WORK" && fail=1
if pgrep -f "zlfs .*$WORK/" >/dev/null; then
	echo "FAIL: a zlfs daemon on $WORK is still running: $(pgrep -af "zlfs .*$WORK/")"
	fail=1
fi
CSV=$OUT/parallel.csv
[[ $(head -1 "$CSV") == "$COLS" ]] || { echo "FAIL: parallel.csv columns: $(head -1 "$CSV")"; fail=1; }
figure() { awk -F, -v m="$1" -v c="$2" -v k="$3" '$1 == "zlfs" && $2 == 1 && $3 == m && $4 == c && $5 == k { print $6 }' "$CSV"; }
num='^[0-9]+(\.[0-9]+)?$'
# every figure each measurement reports, and that the ratios are made of
for f in writers:one:MiBps writers:four:MiBps creates:one:ops creates:four:ops \
	read-writer:idle:iops read-writer:idle:p99_us read-writer:writer:iops read-writer:writer:p99_us \
	read-writer:writer:writer_MiBps read-gc:idle:iops read-gc:idle:p99_us read-gc:writer:iops \
	read-gc:writer:p99_us read-gc:gc:iops read-gc:gc:p99_us read-gc:gc:writer_MiBps \
	read-gc:gc:gc_migrated_MiB stat-cp:idle:p99_us stat-cp:checkpoint:p99_us stat-cp:change:p99_us \
	stat-cp:idle:p999_us stat-cp:checkpoint:p999_us stat-cp:idle:rate stat-cp:checkpoint:rate \
	stat-cp:checkpoint:checkpoints stat-cp:checkpoint:sync_ms_median; do
	IFS=: read -r m c k <<<"$f"
	v=$(figure "$m" "$c" "$k")
	if ! [[ $v =~ $num ]] || ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then
		echo "FAIL: parallel.csv: $m $c $k is not a positive number ('$v')"
		fail=1
	fi
done
# the disk alone beside a writer held to zlfs's rate (skipped only with the workdir on tmpfs)
if [[ $(stat -f -c %T "$WORK") != tmpfs ]]; then
	for c in idle writer; do
		v=$(awk -F, -v c="$c" '$1 == "disk" && $3 == "read-writer" && $4 == c && $5 == "p99_us" { print $6 }' "$CSV")
		[[ $v =~ $num ]] || { echo "FAIL: parallel.csv: no disk read-writer $c p99 ('$v')"; fail=1; }
	done
	dw=$(awk -F, '$1 == "disk" && $3 == "read-writer" && $5 == "writer_MiBps" { print $6 }' "$CSV")
	zw=$(figure read-writer writer writer_MiBps)
	awk -v d="$dw" -v z="$zw" 'BEGIN { exit !(d > 0 && d <= 1.2 * z) }' ||
		{ echo "FAIL: the disk's writer ran at '$dw' MiB/s, not held to zlfs's '$zw'"; fail=1; }
fi
v=$(figure stat-cp checkpoint checkpoints)
[[ $v == 4 ]] || { echo "FAIL: stat-cp wrote $v checkpoints, expected 2000 files / 500 = 4"; fail=1; }
# every ratio: loaded / base of the same round (one round: the ratio itself)
for r in writers_4_vs_1:writers:MiBps:one:four creates_4_vs_1:creates:ops:one:four \
	read_p99_seqwriter:read-writer:p99_us:idle:writer read_iops_seqwriter:read-writer:iops:idle:writer \
	read_iops_gc:read-gc:iops:idle:gc read_p99_gc:read-gc:p99_us:idle:gc \
	read_iops_gc_vs_writer:read-gc:iops:writer:gc read_p99_gc_vs_writer:read-gc:p99_us:writer:gc \
	stat_p99_checkpoint:stat-cp:p99_us:idle:checkpoint stat_p99_changes:stat-cp:p99_us:idle:change \
	stat_p999_checkpoint:stat-cp:p999_us:idle:checkpoint stat_rate_checkpoint:stat-cp:rate:idle:checkpoint; do
	IFS=: read -r n m k bc lc <<<"$r"
	b=$(figure "$m" "$bc" "$k") l=$(figure "$m" "$lc" "$k")
	want=$(awk -v b="$b" -v l="$l" 'BEGIN { if (b > 0) printf "%.6f", l / b }')
	got=$(ratio zlfs "$n" "$OUT/summary.csv")
	close_to "$got" "$want" || { echo "FAIL: summary.csv $n = '$got', but $lc/$bc of $m $k in parallel.csv is '$want'"; fail=1; }
done
[[ -s $OUT/parallel.png && $(head -c 4 "$OUT/parallel.png" | od -An -c | tr -d ' ') == 211PNG ]] ||
	{ echo "FAIL: no PNG plot"; fail=1; }
"$REPO/tools/bench-parallel" --summary "$CSV" >"$T/resummary.txt"
cmp -s "$T/resummary.txt" "$OUT/summary.txt" || { echo "FAIL: the run's summary differs from --summary of its CSV"; fail=1; }
grep -q '^# zlfs commit: [0-9a-f]\{40\}' "$OUT/commands.txt" || { echo "FAIL: commands.txt does not record the commit"; fail=1; }
grep -q 'parallel.py create .* --procs 4 ' "$OUT/commands.txt" || { echo "FAIL: commands.txt lacks the creates"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: tools/bench-parallel --quick: every figure and ratio, the plot and the summary"
exit $fail
