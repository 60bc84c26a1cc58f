#!/usr/bin/env bash
# bench_smoke.sh BUILD_DIR - run `tools/bench --quick` against the binaries of BUILD_DIR and
# check that it reports both figures and a numeric ratio for every metric, in the printed
# table and in results.csv. Exit 77 (skipped) only when fio is not installed.
set -uo pipefail
BUILD=${1:?usage: bench_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v fio >/dev/null || { echo "fio is not installed: skipped"; exit 77; }

TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP/bench"
mkdir -p "$TMP/bench"
OUT=$TMP/bench/out
"$REPO/tools/bench" --quick --no-build --build "$BUILD" --workdir "$TMP/bench/work" \
	--out "$OUT" >"$TMP/bench/stdout" 2>"$TMP/bench/stderr"
rc=$?
cat "$TMP/bench/stdout"
if [[ $rc != 0 ]]; then
	tail -30 "$TMP/bench/stderr"
	echo "FAIL: tools/bench --quick exited with $rc"
	exit 1
fi

num='[0-9]+(\.[0-9]+)?'
fail=0
for m in seq_write_MiBps seq_read_MiBps randread_qd1_iops randread_qd1_p50_us \
	randread_qd1_p99_us randread_qd32x4_iops randread_qd32x4_p99_us meta_create_ops \
	meta_stat_ops meta_readdir_ops meta_unlink_ops daemon_peak_rss_meta_MiB; do
	# metric,label,unit,passthrough,zlfs,ratio,ratio_is,note
	if ! grep -qE "^$m,[^,]*,[^,]*,$num,$num,$num,(zlfs/passthrough|passthrough/zlfs)," \
		"$OUT/results.csv"; then
		echo "FAIL: results.csv has no figures and numeric ratio for $m"
		fail=1
	fi
	label=$(awk -F, -v m="$m" '$1 == m { print $2 }' "$OUT/results.csv")
	if [[ -z $label ]] || ! awk -v l="$label" 'index($0, l) == 1 {
		if (substr($0, length(l) + 1) ~ /^ +[^ ]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +(zlfs|passthrough)\/(zlfs|passthrough)/)
			f = 1 } END { exit !f }' "$TMP/bench/stdout"; then
		echo "FAIL: the printed table has no ratio for $m"
		fail=1
	fi
done
[[ $fail == 0 ]] && echo "PASS: every metric has both figures and a ratio"
exit $fail
