#!/usr/bin/env bash
# bench_gc_smoke.sh BUILD_DIR - run `tools/bench-gc --quick` against the binaries of BUILD_DIR
# and check that waf.csv has a row per workload with the WAF, the FIFO reference (recomputed
# here), their ratio, the write rates and their ratio, the read p99, the GC figures and a plot,
# that results.csv has the read-latency figures with and without GC as numbers, and that
# nothing is left mounted or running. Exit 77 (skipped) only when /dev/fuse, fio or
# gnuplot is missing.
set -uo pipefail
BUILD=${1:?usage: bench_gc_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
smoke_needs fio gnuplot

TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP/bench-gc"
mkdir -p "$TMP/bench-gc"
OUT=$TMP/bench-gc/out
WORK=$TMP/bench-gc/work
"$REPO/tools/bench-gc" --quick --no-build --build "$BUILD" --workdir "$WORK" --out "$OUT" \
	>"$TMP/bench-gc/stdout" 2>"$TMP/bench-gc/stderr"
rc=$?
cat "$TMP/bench-gc/stdout"
fail=0
if [[ $rc != 0 ]]; then
	tail -30 "$TMP/bench-gc/stderr"
	echo "FAIL: tools/bench-gc --quick exited with $rc"
	fail=1
fi

# Nothing may stay behind: no mount under the work directory, no daemon serving its images.
if awk -v w="$WORK/" 'index($5, w) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
	echo "FAIL: a mount under $WORK is left behind"
	fail=1
fi
if pgrep -f "zlfs .*$WORK/" >/dev/null; then
	echo "FAIL: a zlfs daemon on $WORK is still running: $(pgrep -af "zlfs .*$WORK/")"
	fail=1
fi
[[ $rc == 0 ]] || exit 1

value() { awk -F, -v m="$1" '$1 == m { print $2 }' "$OUT/results.csv"; }
num='^[0-9]+(\.[0-9]+)?$'
for m in lat_idle_iops lat_idle_p50_us lat_idle_p99_us lat_idle_p999_us \
	lat_gc_iops lat_gc_p50_us lat_gc_p99_us lat_gc_p999_us lat_gc_gc_overlap_with_users \
	ratio_gc_idle_iops ratio_gc_idle_p50 ratio_gc_idle_p99 ratio_gc_idle_p999; do
	v=$(value "$m")
	if ! [[ $v =~ $num ]]; then
		echo "FAIL: results.csv has no number for $m (got '$v')"
		fail=1
	fi
done
for m in lat_idle_p99_us lat_gc_p99_us lat_idle_iops lat_gc_iops; do
	v=$(value "$m")
	if ! [[ $v =~ $num ]] || ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then
		echo "FAIL: $m is not positive ($v)"
		fail=1
	fi
done

# The WAF matrix: one row per workload, every column a number, the FIFO reference what
# (x - 1) / ln x = u gives at the row's fill, the ratios consistent, a plot per run.
WAF=$OUT/waf.csv
if [[ ! -s $WAF ]]; then
	echo "FAIL: no waf.csv"
	fail=1
else
	python3 - "$WAF" "$OUT" <<'PY' || fail=1
import csv, math, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = []
want = {"uniform", "skew80", "skew95", "rand4k"}
if {r["workload"] for r in rows} != want:
    bad.append("workloads %s, expected %s" % (sorted({r["workload"] for r in rows}), sorted(want)))
for r in rows:
    tag = "%s %s %s%%" % (r["geometry"], r["workload"], r["fill_pct"])
    for k in ("waf", "waf_last_third", "fifo", "ratio_fifo", "fill_MiBps", "overwrite_MiBps", "ratio_rate",
              "read_p99_us", "reads", "gc_MiB_migrated", "gc_zones_reclaimed", "gc_energy_j_per_reclaimed_gib"):
        try:
            float(r[k])
        except (KeyError, ValueError):
            bad.append("%s: %s is not a number (%r)" % (tag, k, r.get(k)))
    if bad:
        continue
    u = float(r["used_pct"]) / 100
    x = [v for v in (i / 100000.0 for i in range(1, 100000)) if (v - 1) / math.log(v) >= u][0]
    if abs(float(r["fifo"]) - 1 / (1 - x)) > 0.01:
        bad.append("%s: FIFO reference %s, expected %.3f" % (tag, r["fifo"], 1 / (1 - x)))
    if abs(float(r["ratio_fifo"]) - float(r["waf"]) / float(r["fifo"])) > 0.01:
        bad.append("%s: ratio %s is not WAF / FIFO" % (tag, r["ratio_fifo"]))
    if abs(float(r["ratio_rate"]) - float(r["overwrite_MiBps"]) / float(r["fill_MiBps"])) > 0.01:
        bad.append("%s: rate ratio %s is not overwrite / fill rate" % (tag, r["ratio_rate"]))
    if not 1.0 <= float(r["waf"]) < 50 or float(r["read_p99_us"]) <= 0 or int(r["reads"]) <= 0:
        bad.append("%s: WAF %s, read p99 %s over %s reads" % (tag, r["waf"], r["read_p99_us"], r["reads"]))
    if r["workload"] == "uniform" and float(r["gc_MiB_migrated"]) <= 0:
        bad.append("%s: GC migrated nothing" % tag)
    try:  # data moves by destination log: part of all moves (nodes go to the node logs)
        to_logs = sum(float(r["gc_MiB_to_" + log]) for log in ("cold", "frozen", "hot"))
        if to_logs > float(r["gc_MiB_migrated"]) + 3:
            bad.append("%s: %.0f MiB moved to the data logs, %s migrated in all" %
                       (tag, to_logs, r["gc_MiB_migrated"]))
    except (KeyError, ValueError):
        bad.append("%s: the MiB moved to each GC log are not numbers" % tag)
    png = os.path.join(sys.argv[2], "waf-%s-%s-%s-%s.png" % (r["version"], r["geometry"].replace(":", "-"),
                                                              r["workload"], r["fill_pct"]))
    if not (os.path.exists(png) and os.path.getsize(png) > 0):
        bad.append("%s: no plot %s" % (tag, png))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
fi
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$OUT/results.json" ||
	{ echo "FAIL: results.json is not valid JSON"; fail=1; }
grep -q '^# zlfs commit: [0-9a-f]\{40\}' "$OUT/commands.txt" ||
	{ echo "FAIL: commands.txt does not record the commit"; fail=1; }
grep -q '^WARNING' "$TMP/bench-gc/stdout" && echo "note: tools/bench-gc printed warnings (above)"
[[ $fail == 0 ]] && echo "PASS: the WAF matrix (WAF, FIFO reference, rates, read p99, GC figures, plots) and read latency with and without GC reported"
exit $fail
