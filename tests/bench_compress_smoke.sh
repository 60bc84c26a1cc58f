#!/usr/bin/env bash
# bench_compress_smoke.sh BUILD_DIR - tools/bench-compress on a few MiB against the binaries of
# BUILD_DIR: the limit tool on files whose answer is known, the summary of a known CSV, then
# the quick run: a row per filesystem and phase with its figures as numbers, the limits and
# the ratios consistent, incompressible data at 1.0 of its limit's size, compressible logs
# stored in fewer device bytes with lz4 and zstd than without, fsck clean, a plot, and nothing
# left mounted. Exit 77 (skipped) only when /dev/fuse or fio is missing.
set -uo pipefail
BUILD=${1:?usage: bench_compress_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP/bcz"
mkdir -p "$TMP/bcz/files"
OUT=$TMP/bcz/out
WORK=$TMP/bcz/work
fail=0

# The limit tool: 16 KiB of zeros store nothing; 64 KiB of random bytes store 16 blocks with
# any codec; 64 KiB of one repeated line compress to 1 block a cluster (4 clusters); a file of
# 5000 bytes is one cluster padded with zeros.
LIM=$BUILD/bin/zlfs-compress-limit
head -c 16384 /dev/zero >"$TMP/bcz/files/zero"
head -c 65536 /dev/urandom >"$TMP/bcz/files/random"
yes 'the same line of a log, again and again' | head -c 65536 >"$TMP/bcz/files/text"
head -c 5000 "$TMP/bcz/files/text" >"$TMP/bcz/files/short"
limit() { # ALG FILE KEY
	"$LIM" --alg "$1" "$TMP/bcz/files/$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"
}
want() { # ALG FILE KEY VALUE
	local v
	v=$(limit "$1" "$2" "$3")
	[[ $v == "$4" ]] || { echo "FAIL: zlfs-compress-limit --alg $1 $2: $3 $v, expected $4"; fail=1; }
}
for alg in none lz4 zstd; do
	want "$alg" zero stored_blocks 0
	want "$alg" random stored_blocks 16
	want "$alg" short blocks 2
done
want none text stored_blocks 16
want lz4 text stored_blocks 4
want zstd text stored_blocks 4
want lz4 short stored_blocks 1
want none short stored_blocks 2
"$LIM" --alg gzip "$TMP/bcz/files" 2>/dev/null && { echo "FAIL: zlfs-compress-limit took --alg gzip"; fail=1; }

# The summary is computed from the CSV: store-logs dev/user medians 1.04 (none) and 0.52,
# 0.50, 0.60 (lz4: median 0.52, limit 0.50 -> x 1.04), seqwrite-text 100 and 90 MiB/s (0.9).
cat >"$TMP/bcz/known.csv" <<'EOF'
round,fs,test,user_bytes,dev_bytes,dev_per_user,limit_bytes,limit_per_user,ratio_limit,seconds,MiBps,iops,waf_classic,gc_moved_bytes,note
1,none,store-logs,100,104,1.04,100,1.0,1.04,1,1,,,,
1,lz4,store-logs,100,52,0.52,50,0.50,1.04,1,1,,,,
2,none,store-logs,100,104,1.04,100,1.0,1.04,1,1,,,,
2,lz4,store-logs,100,50,0.50,50,0.50,1.00,1,1,,,,
3,none,store-logs,100,104,1.04,100,1.0,1.04,1,1,,,,
3,lz4,store-logs,100,60,0.60,50,0.50,1.20,1,1,,,,
1,none,seqwrite-text,100,100,1.0,,,,1,100,,,,
1,lz4,seqwrite-text,100,50,0.5,,,,1,90,,,,
1,none,churn,100,300,3.0,,,,1,40,,1.5,100,
1,lz4,churn,100,60,0.6,,,,1,80,,1.2,10,
EOF
KNOWN_SUMMARY=$TMP/bcz/known-summary.csv
"$REPO/tools/bench-compress" --summary "$TMP/bcz/known.csv" --out "$KNOWN_SUMMARY" >/dev/null ||
	{ echo "FAIL: --summary of the known CSV"; fail=1; }
expect lz4 store-logs:dev_per_user 0.52
expect none store-logs:dev_per_user 1.04
expect lz4 store-logs:x_limit 1.04
expect lz4 store-logs:dev_vs_none 0.5
expect lz4 seqwrite-text:vs_none 0.9
expect lz4 churn:dev_vs_none 0.2
expect lz4 churn:waf_classic 1.2

smoke_needs fio
smoke_run bench-compress "$TMP/bcz" "$OUT" "$WORK" --quick
smoke_left_mounted "$WORK" && fail=1
if pgrep -f "zlfs .*$WORK/" >/dev/null; then
	echo "FAIL: a zlfs daemon on $WORK is still running"
	fail=1
fi
python3 - "$OUT/compress.csv" <<'PY' || fail=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = []
by = {(r["fs"], r["test"]): r for r in rows}
stores = ["store-" + c for c in ("tree", "sqlite", "logs", "random")]
for fs in ("none", "lz4", "zstd"):
    for t in stores + ["append-logs", "seqwrite-text", "seqwrite-random", "seqread-text",
                       "seqread-random", "randread-text", "churn"]:
        r = by.get((fs, t))
        if not r:
            bad.append("no row for %s %s" % (fs, t))
            continue
        try:
            if t.startswith("randread"):
                assert float(r["iops"]) > 0, "iops"
            else:
                assert float(r["MiBps"]) > 0, "MiBps"
            if not t.startswith(("seqread", "randread")):
                assert int(r["user_bytes"]) > 0 and int(r["dev_bytes"]) > 0, "bytes"
                assert abs(float(r["dev_per_user"]) - int(r["dev_bytes"]) / int(r["user_bytes"])) < 1e-3, "dev_per_user"
            if t in stores:
                assert float(r["limit_per_user"]) > 0, "limit"
                assert abs(float(r["ratio_limit"]) - float(r["dev_per_user"]) / float(r["limit_per_user"])) < 1e-3, "ratio_limit"
            if t == "churn":
                assert float(r["waf_classic"]) >= 1.0, "classic WAF"
        except (AssertionError, ValueError, KeyError) as e:
            bad.append("%s %s: %s wrong in %s" % (fs, t, e, r))
    for t in ("rss-write", "rss-read"):
        r = by.get((fs, t))
        if not r or not 1024 < int(r["rss_kib"] or 0) < 4 << 20:
            bad.append("%s: no daemon peak RSS in KiB for %s (%s)" % (fs, t, r))
    r = by.get((fs, "store-random"))
    if r and not (0.999 <= float(r["limit_per_user"]) <= 1.001 and 0.99 <= float(r["dev_per_user"]) < 1.5):
        bad.append("%s: random data stored at %s of its size (limit %s)" % (fs, r["dev_per_user"], r["limit_per_user"]))
for fs in ("lz4", "zstd"):
    a, b = by.get((fs, "store-logs")), by.get(("none", "store-logs"))
    if a and b and not (float(a["limit_per_user"]) < 0.8 and float(a["dev_per_user"]) < float(b["dev_per_user"])):
        bad.append("%s: logs not stored in fewer bytes (%s, none %s, limit %s)" %
                   (fs, a["dev_per_user"], b["dev_per_user"], a["limit_per_user"]))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
for f in compress.png summary.csv fsck-none-r1.txt fsck-zstd-r1.txt fsck-churn-lz4-r1.txt; do
	[[ -s $OUT/$f ]] || { echo "FAIL: no $OUT/$f"; fail=1; }
done
"$REPO/tools/bench-compress" --summary "$OUT/compress.csv" | diff - "$OUT/summary.txt" ||
	{ echo "FAIL: summary.txt is not the summary of compress.csv"; fail=1; }
grep -q '^# zlfs commit: [0-9a-f]\{40\}' "$OUT/commands.txt" ||
	{ echo "FAIL: commands.txt does not record the commit"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: bench-compress's limits, summary and quick run (every filesystem and phase, fsck clean)"
exit $fail
