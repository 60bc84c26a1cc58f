#!/usr/bin/env bash
# bench_apps_smoke.sh BUILD_DIR - tools/bench-apps:
#   1. --summary of a hand-written CSV with known figures (two rounds, a failed phase, a dirty
#      fsck): the medians, the ratios both ways round (rates zlfs/other, times other/zlfs),
#      flushes and device bytes per commit, and the failure and the dirty fsck named;
#   2. `tools/bench-apps --quick` against the binaries of BUILD_DIR (tiny images: every
#      filesystem, every application): every phase of every filesystem ran and has numbers,
#      zlfs's rows their WAF and GC figures, the SQLite commits their flushes, every fsck.zlfs
#      is clean, the table has a ratio for every phase, the plot is drawn, nothing is left
#      mounted.
# Exit 77 (skipped) after part 1 when db_bench (rocksdb-tools), /dev/fuse or loop devices are
# missing.
set -uo pipefail
BUILD=${1:?usage: bench_apps_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tests/smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/bench-apps
rm -rf "$T"
mkdir -p "$T"
fail=0
num='^-?[0-9]+(\.[0-9]+)?$'

# ---- 1. the summary of known figures ----------------------------------------------------------
hdr=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import apps; print(",".join(apps.COLUMNS))' "$REPO/tools/lib")
# round,version,fs,app,phase,status,seconds,ops,ops_per_s,app_write_bytes,dev_write_bytes,
# dev_flushes,waf,zlfs_user_bytes,zlfs_dev_bytes,zlfs_waf,gc_moved_bytes,gc_zones,
# gc_phase_changes,used_pct,peak_used_pct,load1,note,host_syncs
cat >"$T/known.csv" <<EOF
$hdr
1,current,zlfs,sqlite,wal-insert,ok,10,1000,100,8000000,30000000,2000,3.75,8000000,30000000,3.75,0,0,0,5,6,1.0,,4000
2,current,zlfs,sqlite,wal-insert,ok,5,1000,200,8000000,32000000,2000,4.0,8000000,32000000,4.0,0,0,1,5,6,2.0,,2000
1,-,passthrough-ext4,sqlite,wal-insert,ok,4,1000,250,8000000,24000000,2040,3.0,,,,,,,1,1,1.0,
2,-,passthrough-ext4,sqlite,wal-insert,ok,2,1000,500,8000000,24000000,2040,3.0,,,,,,,1,1,1.0,
1,-,ext4,sqlite,wal-insert,ok,2,1000,400,8000000,16000000,1000,2.0,,,,,,,1,1,1.0,
1,current,zlfs,tree,untar,ok,3,100,33.3,1000,2000,,2.0,1000,2000,2.0,1048576,1,2,10,11,1.0,
1,-,passthrough-ext4,tree,untar,ok,2,100,50,1000,1500,,1.5,,,,,,,1,1,1.0,
1,-,ext4,tree,untar,ok,1.5,100,66.7,1000,1200,,1.2,,,,,,,1,1,1.0,
1,current,zlfs,rocksdb,fillrandom,failed,7,,,,,,,,,,,,,,80,1.0,db_bench fillrandom exited with 1: IO error: No space left on device
1,current,zlfs,rocksdb,overwrite,skipped,,,,,,,,,,,,,,,,1.0,after fillrandom failed
1,current,zlfs,rocksdb,fsck,dirty,,,,,,,,,,,,,,,,,1 error
1,current,zlfs,tree,fsck,clean,,,,,,,,,,,,,,,,,clean
EOF
"$REPO/tools/bench-apps" --summary "$T/known.csv" --out "$T/known-summary.csv" >"$T/known.txt" 2>&1 ||
	{ cat "$T/known.txt"; echo "FAIL: --summary of a known CSV exited with an error"; fail=1; }
known() { # FS PHASE METRIC VALUE: summary.csv holds VALUE (to 0.001)
	local v
	v=$(awk -F, -v f="$1" -v p="$2" -v m="$3" '$1 == f && $2 == p && $3 == m { print $4 }' "$T/known-summary.csv")
	awk -v v="$v" -v e="$4" 'BEGIN { exit !(v != "" && v - e < 0.001 && e - v < 0.001) }' ||
		{ echo "FAIL: summary $1 $2 $3 = '$v', expected $4"; fail=1; }
}
known zlfs wal-insert ops_per_s 150              # the median of 100 and 200
known passthrough-ext4 wal-insert ops_per_s 375
known zlfs/passthrough-ext4 wal-insert ratio 0.4 # a rate: zlfs over the other
known zlfs/ext4 wal-insert ratio 0.375
known zlfs wal-insert flushes_per_op 2
known zlfs wal-insert dev_bytes_per_op 31000
known passthrough-ext4 wal-insert flushes_per_op 2.04
known zlfs wal-insert syncs_per_flush 1.5         # the median of 4000 and 2000 over 2000 flushes
known zlfs/passthrough-ext4 untar ratio 0.6667   # a time: the other over zlfs
known zlfs/ext4 untar ratio 0.5
known zlfs untar zlfs_waf 2
known zlfs fsck dirty_runs 1
grep -q 'FAILED: zlfs rocksdb fillrandom round 1: failed (db_bench fillrandom exited with 1: IO error: No space left on device)' "$T/known.txt" ||
	{ cat "$T/known.txt"; echo "FAIL: the table does not name the failed phase"; fail=1; }
grep -q 'fsck.zlfs -n after zlfs: NOT CLEAN in 1 of 2 runs' "$T/known.txt" ||
	{ cat "$T/known.txt"; echo "FAIL: the table does not name the dirty fsck"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the summary of a known CSV"

# ---- 2. a quick run -----------------------------------------------------------------------------
command -v db_bench >/dev/null || { echo "SKIP: db_bench is not installed (apt-get install rocksdb-tools, or tools/install-deps --tests)"; exit $((fail ? 1 : 77)); }
smoke_needs fusermount3 git mkfs.ext4 gnuplot
[[ $EUID == 0 && -e /dev/loop-control ]] || { echo "SKIP: the ext4 baselines need root and loop devices"; exit $((fail ? 1 : 77)); }
OUT=$T/out WORK=$T/work
smoke_run bench-apps "$T" "$OUT" "$WORK" --quick
CSV=$OUT/apps.csv
python3 - "$CSV" <<'PY' || fail=1
import csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
num = re.compile(r"^-?\d+(\.\d+)?$")
phases = {"rocksdb": ["fillrandom", "overwrite", "readrandom"],
          "sqlite": ["%s-%s" % (m, p) for m in ("wal", "rollback") for p in ("insert", "churn", "select")],
          "tree": ["untar", "git-add", "git-commit", "rm"]}
bad = []
for fs in ("zlfs", "zlfs-buffered", "passthrough-ext4", "ext4"):
    for app, ps in phases.items():
        for p in ps:
            r = [x for x in rows if x["fs"] == fs and x["app"] == app and x["phase"] == p]
            if len(r) != 1 or r[0]["status"] != "ok":
                bad.append("%s %s: %s" % (fs, p, r[0]["status"] + " " + r[0]["note"] if r else "no row"))
                continue
            r = r[0]
            cols = ["seconds", "ops", "ops_per_s", "dev_write_bytes", "dev_flushes", "peak_used_pct", "load1"]
            if not p.endswith("select") and p != "rm" and p != "readrandom":
                cols += ["app_write_bytes", "waf"]
            if fs.startswith("zlfs"):
                cols += ["zlfs_user_bytes", "zlfs_dev_bytes", "gc_moved_bytes", "gc_zones", "gc_phase_changes"]
                if "app_write_bytes" in cols:
                    cols.append("zlfs_waf")
            for c in cols:
                if not num.match(r[c]):
                    bad.append("%s %s: %s = '%s'" % (fs, p, c, r[c]))
            if p.endswith("insert") and not (num.match(r["dev_flushes"]) and float(r["dev_flushes"]) >= float(r["ops"])):
                bad.append("%s %s: %s flushes for %s commits (synchronous=FULL: at least one each)"
                           % (fs, p, r["dev_flushes"], r["ops"]))
            if r["waf"] and float(r["waf"]) <= 0:
                bad.append("%s %s: WAF %s" % (fs, p, r["waf"]))
    if fs.startswith("zlfs"):
        f = [x["status"] for x in rows if x["fs"] == fs and x["phase"] == "fsck"]
        if f != ["clean"] * 3:
            bad.append("%s: fsck.zlfs -n gave %s, not clean after each of the 3 runs" % (fs, f))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
for ph in fillrandom overwrite readrandom untar git-add git-commit rm wal-insert wal-churn wal-select \
	rollback-insert rollback-churn rollback-select; do
	grep -qE "^$ph +[^ ]+( +[0-9.]+){8}$" "$OUT/summary.txt" ||
		{ echo "FAIL: the table's $ph line lacks a figure or a ratio"; fail=1; }
done
[[ -s $OUT/apps.png ]] || { echo "FAIL: no plot"; fail=1; }
grep -q '^db_bench .*--benchmarks=fillrandom' "$OUT/commands.txt" || { echo "FAIL: commands.txt lacks db_bench"; fail=1; }
smoke_left_mounted "$WORK" && fail=1
[[ $fail == 0 ]] && echo "PASS: tools/bench-apps --quick: every phase on every filesystem, fsck clean"
exit $fail
