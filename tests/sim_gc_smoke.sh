#!/usr/bin/env bash
# sim_gc_smoke.sh - tools/sim-gc against what is known without it:
#   1. FIFO cleaning under uniform overwrites, long enough for the steady state, must give the
#      WAF the analytic model gives at the same utilisation, 1 / (1 - x) with
#      (x - 1) / ln x = u, within 3%, at two fills;
#   2. with the hot set known (classes oracle), 80/20 overwrites must cost clearly less than
#      uniform ones (below 0.9x), and with no separation not (at least 0.9x): the model's
#      logs separate what they are told to and nothing else.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIM=$REPO/tools/sim-gc
fail=0

check() { # DESCRIPTION PYTHON-EXPRESSION: fail unless it holds
	if python3 -c "import sys; sys.exit(0 if ($2) else 1)"; then
		echo "ok: $1"
	else
		echo "FAIL: $1 ($2)"
		fail=1
	fi
}

for fill in 0.5 0.85; do
	out=$("$SIM" --fill "$fill" --zones 128 --zone-files 64 --factor 6 --seeds 1 \
		--policies fifo --classes none --workloads uniform) ||
		{ echo "FAIL: sim-gc exited $?"; exit 1; }
	echo "$out"
	ref=$(sed -n 's/.*FIFO reference WAF \([0-9.]*\).*/\1/p' <<<"$out")
	waf=$(awk '$1 == "uniform" && $2 == "fifo" {print $4}' <<<"$out")
	check "FIFO at fill $fill: WAF $waf within 3% of the analytic $ref" \
		"${ref:-0} > 1 and abs(${waf:-0} - ${ref:-0}) <= 0.03 * ${ref:-0}"
done

out=$("$SIM" --fill 0.75 --seeds 1 --policies greedy --classes none,oracle \
	--workloads uniform,skew80) || { echo "FAIL: sim-gc exited $?"; exit 1; }
echo "$out"
oracle=$(awk '$1 == "skew80" && $3 == "oracle" {print $5}' <<<"$out")
none=$(awk '$1 == "skew80" && $3 == "none" {print $5}' <<<"$out")
check "80/20 with the hot set known: $oracle of uniform, below 0.9" "0 < ${oracle:-0} < 0.9"
check "80/20 without separation: $none of uniform, at least 0.9" "${none:-0} >= 0.9"
exit $fail
