#!/usr/bin/env bash
# conv_model_smoke.sh BUILD_DIR - the three workloads with --guest conv-model (zlfs on the
# emulator's zoned mode against kernel F2FS on its conventional mode, over NBD in the guest):
#   1. the device-time summaries of hand-written CSVs: the random-read knee against the map
#      cache's cover, the IOPS drop and the zlfs/F2FS ratio; the aging write floor in device
#      time, its ratio and the iteration device GC began; the verification's device time
#      (figures worked out by hand below; runs without a guest);
#   2. tools/bench-randrange, tools/age and tools/install-verify --guest conv-model at their
#      smallest: a CSV with rows for zlfs and f2fs-conv-model carrying device-time figures,
#      zlfs's reads never missing the map, a plot, the summary equal to --summary of the CSV,
#      nothing left mounted and no NBD server left behind.
# Exit 77 (skipped) when the guest, /dev/fuse, fio or gnuplot is missing (after part 1).
set -uo pipefail
BUILD=${1:?usage: conv_model_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/conv-model
rm -rf "$T"
mkdir -p "$T"
fail=0

# ---- 1. the summaries of known CSVs -----------------------------------------------------------
RR=fs,range_bytes,range_GiB,job,iops,MiBps,mean_us,p50_us,p99_us,direct,dev_iops,dev_read_us,dev_map_miss_pct,dev_cover_bytes
cat >"$T/rr.csv" <<EOF
$RR
zlfs,16777216,0.016,qd1,300,1,3000,2900,9000,1,80000,51,0,0
zlfs,67108864,0.062,qd1,300,1,3000,2900,9000,1,80000,51,0,0
zlfs,268435456,0.250,qd1,300,1,3000,2900,9000,1,80000,51,0,0
f2fs-conv-model,16777216,0.016,qd1,200,1,5000,4900,9000,1,80000,51,0,33554432
f2fs-conv-model,67108864,0.062,qd1,200,1,5000,4900,9000,1,52000,78,53,33554432
f2fs-conv-model,268435456,0.250,qd1,200,1,5000,4900,9000,1,43000,95,88,33554432
EOF
"$REPO/tools/bench-randrange" --summary "$T/rr.csv" --out "$T/rr-summary.csv" >"$T/rr-summary.txt" ||
	{ echo "FAIL: bench-randrange --summary exited with an error"; fail=1; }
cat "$T/rr-summary.txt"
rr_expect() { # FS METRIC VALUE (job qd1)
	local v
	v=$(awk -F, -v f="$1" -v m="$2" '$1 == f && $2 == "qd1" && $3 == m { print $4 }' "$T/rr-summary.csv")
	awk -v v="$v" -v e="$3" 'BEGIN { exit !(v != "" && v - e < 0.001 && e - v < 0.001) }' ||
		{ echo "FAIL: summary $1 qd1 $2 = '$v', expected $3"; fail=1; }
}
# the knee: the first range missing more than 20% (64M), the first range beyond the 32M cover
rr_expect f2fs-conv-model dev_knee_bytes 67108864
rr_expect f2fs-conv-model dev_knee_agrees 1
rr_expect f2fs-conv-model dev_iops_drop_pct 46.25      # 1 - 43000 / 80000
rr_expect zlfs dev_iops_drop_pct 0
rr_expect zlfs/f2fs-conv-model dev_ratio_iops_256M 1.860 # 80000 / 43000
grep -q "the knee is the first range beyond it" "$T/rr-summary.txt" ||
	{ echo "FAIL: the knee's check is not printed"; fail=1; }

AGE=fs,iter,elapsed_s,files,file_bytes,fill_s,test_bytes,write_MiBps,read_MiBps,free_bytes,free_pct,gc_phase,gc_phases_seen,waf,free_zones,gc_bytes_migrated,direct,dev_write_MiBps,dev_read_MiBps,dev_waf,dev_gc_pages,dev_erases,dev_map_miss_pct
cat >"$T/age.csv" <<EOF
$AGE
zlfs,1,1,64,131072,0.1,8388608,100,200,900,90,no-gc,no-gc,1.0,50,0,1,2000,4000,1.10,0,4,0
zlfs,2,2,64,131072,0.1,8388608,100,200,800,80,no-gc,no-gc,1.0,40,0,1,1800,4000,1.15,0,4,0
zlfs,3,3,64,131072,0.1,8388608,100,200,700,70,normal,normal,1.2,30,10,1,1600,3900,1.20,0,8,0
f2fs-conv-model,1,1,64,131072,0.1,8388608,50,100,900,90,,,,,,1,2500,4000,1.05,0,0,0
f2fs-conv-model,2,2,64,131072,0.1,8388608,50,100,800,80,,,,,,1,1000,3000,1.50,5000,8,30
f2fs-conv-model,3,3,64,131072,0.1,8388608,50,100,700,70,,,,,,1,800,2600,2.00,9000,12,40
EOF
"$REPO/tools/age" --summary "$T/age.csv" --first 1 --window 1 --out "$T/age-summary.csv" >"$T/age-summary.txt" ||
	{ echo "FAIL: age --summary exited with an error"; fail=1; }
cat "$T/age-summary.txt"
KNOWN_SUMMARY=$T/age-summary.csv
expect zlfs dev_write_floor_MiBps 1600
expect f2fs-conv-model dev_write_floor_MiBps 800
expect zlfs/f2fs-conv-model dev_ratio_write_floor_MiBps 2
expect f2fs-conv-model dev_read_drop_pct 35      # 1 - 2600 / 4000
expect f2fs-conv-model dev_gc_began_iter 2
expect f2fs-conv-model dev_waf_last 2

IV=fs,aged_iters,used_pct,files,bytes,install_s,install_MiBps,verify_s,verify_MiBps,mismatches,dev_reads,dev_read_bytes,mean_read_KiB,reads_lt_4k,reads_4k_8k,reads_8k_16k,reads_16k_32k,reads_32k_64k,reads_64k_128k,reads_128k_256k,reads_256k_512k,reads_ge_512k,gc_migrated_bytes,dev_install_s,dev_verify_s,dev_verify_MiBps,dev_verify_qd1_s
cat >"$T/iv.csv" <<EOF
$IV
zlfs,6,50,100,25165824,1,24,1,24,0,100,,,0,10,0,0,0,0,90,0,0,,0.02,0.030,800,0.06
f2fs-conv-model,6,50,100,25165824,1,24,1,24,0,100,,,0,66,0,0,0,0,4,0,30,,0.03,0.035,685.7,0.08
EOF
"$REPO/tools/install-verify" --summary "$T/iv.csv" --out "$T/iv-summary.csv" >"$T/iv-summary.txt" ||
	{ echo "FAIL: install-verify --summary exited with an error"; fail=1; }
cat "$T/iv-summary.txt"
KNOWN_SUMMARY=$T/iv-summary.csv
expect zlfs dev_verify_s 0.03
expect zlfs/f2fs-conv-model dev_verify_time_cut_pct 14.286 # 1 - 0.030 / 0.035
expect zlfs/f2fs-conv-model dev_verify_qd1_time_cut_pct 25  # 1 - 0.06 / 0.08
[[ $fail == 0 ]] && echo "PASS: the device-time summaries of the known CSVs"

# ---- 2. quick runs in the guest ---------------------------------------------------------------
[[ -r /dev/fuse && -w /dev/fuse ]] || { echo "SKIP: /dev/fuse not available"; exit $((fail ? 1 : 77)); }
for t in fio gnuplot mkfs.f2fs; do
	command -v $t >/dev/null || { echo "SKIP: $t is not installed"; exit $((fail ? 1 : 77)); }
done
"$REPO/tools/zoned-vm" --check >/dev/null 2>&1 || { echo "SKIP: the zoned guest cannot run here"; exit $((fail ? 1 : 77)); }
col() { head -1 "$1" | tr , '\n' | grep -nx "$2" | cut -d: -f1; }
# rows of FS in CSV whose column COL is a positive number
positive() { awk -F, -v f="$2" -v c="$(col "$1" "$3")" 'NR > 1 && $1 == f && $c + 0 > 0' "$1" | wc -l; }
check_run() { # TOOL CSV PNG COLUMN...: rows for both with positive device figures, plot, summary
	local tool=$1 csv=$2 png=$3 c n
	shift 3
	for c in "$@"; do
		for fs in zlfs f2fs-conv-model; do
			n=$(positive "$csv" $fs "$c")
			((n > 0)) || { echo "FAIL: $tool: no row of $fs with a positive $c"; fail=1; }
		done
	done
	[[ -s $png && $(head -c 4 "$png" | od -An -c | tr -d ' ') == 211PNG ]] || { echo "FAIL: $tool: no PNG plot"; fail=1; }
	"$REPO/tools/$tool" --summary "$csv" >"$T/$tool-resummary.txt"
	cmp -s "$T/$tool-resummary.txt" "$(dirname "$csv")/summary.txt" ||
		{ echo "FAIL: $tool: the run's summary differs from --summary of its CSV"; fail=1; }
	grep -q "Device time on the emulator's NAND model" "$(dirname "$csv")/summary.txt" ||
		{ echo "FAIL: $tool: no device-time section in the summary"; fail=1; }
	smoke_left_mounted "$T/work" && fail=1
	[[ ! -e $T/work/conv.sock ]] || { echo "FAIL: $tool: the NBD server's socket is left behind"; fail=1; }
}
smoke_run bench-randrange "$T" "$T/rr" "$T/work" --guest conv-model --quick --jobs qd1 --ranges 16M,64M
check_run bench-randrange "$T/rr/randrange.csv" "$T/rr/randrange.png" dev_iops dev_read_us
awk -F, -v c="$(col "$T/rr/randrange.csv" dev_map_miss_pct)" '$1 == "zlfs" && $c != "0.00" { bad = 1 } END { exit bad }' \
	"$T/rr/randrange.csv" || { echo "FAIL: zlfs's reads missed the zone map"; fail=1; }
n=$(positive "$T/rr/randrange.csv" f2fs-conv-model dev_map_miss_pct)
((n == 2)) || { echo "FAIL: F2FS's reads on the conventional model never missed its map cache"; fail=1; }
smoke_run age "$T" "$T/age" "$T/work" --guest conv-model --quick --max-iters 2
check_run age "$T/age/age.csv" "$T/age/age.png" dev_write_MiBps dev_read_MiBps dev_waf
smoke_run install-verify "$T" "$T/iv" "$T/work" --guest conv-model --quick --age-iters 2 --size 8M
check_run install-verify "$T/iv/install-verify.csv" "$T/iv/read-sizes.png" dev_verify_s dev_verify_qd1_s dev_reads
[[ $fail == 0 ]] && echo "PASS: the three workloads --guest conv-model: CSV, device figures, plot and summary"
exit $fail
