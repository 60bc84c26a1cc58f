# smoke_lib.sh - what every benchmark smoke test does around its own checks. Source it after
# setting BUILD (the build directory) and REPO; it sets nothing else.

# smoke_run TOOL T OUT WORK [ARGS...]: run tools/TOOL on the binaries of $BUILD with WORK and
# OUT, its output in T/stdout and T/stderr; print stdout; on failure print the end of stderr
# and exit 1 (the rest of the test has nothing to check then).
smoke_run() {
	local tool=$1 t=$2 out=$3 work=$4 rc
	shift 4
	"$REPO/tools/$tool" --no-build --build "$BUILD" --workdir "$work" --out "$out" "$@" \
		>"$t/stdout" 2>"$t/stderr"
	rc=$?
	cat "$t/stdout"
	if [[ $rc != 0 ]]; then
		tail -30 "$t/stderr"
		echo "FAIL: tools/$tool $* exited with $rc"
		exit 1
	fi
}

# smoke_left_mounted WORK: true (with a message) when a mount under WORK is left behind.
smoke_left_mounted() {
	if awk -v w="$1/" 'index($5, w) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		echo "FAIL: a mount under $1 is left behind"
		return 0
	fi
	return 1
}

# expect FS METRIC VALUE: the summary CSV $KNOWN_SUMMARY (fs,metric,value rows) holds VALUE
# for FS and METRIC, to 0.001; otherwise say so and set fail=1.
expect() {
	local v
	v=$(awk -F, -v f="$1" -v m="$2" '$1 == f && $2 == m { print $3 }' "$KNOWN_SUMMARY")
	if ! awk -v v="$v" -v e="$3" 'BEGIN { exit !(v != "" && v - e < 0.001 && e - v < 0.001) }'; then
		echo "FAIL: summary $1 $2 = '$v', expected $3"
		fail=1
	fi
}

# smoke_needs CMD...: go on only if /dev/fuse is usable and every CMD is installed; otherwise
# say which is missing and exit 77 (skipped), or 1 if a check before failed (fail=1).
smoke_needs() {
	[[ -r /dev/fuse && -w /dev/fuse ]] || { echo "SKIP: /dev/fuse not available"; exit $((${fail:-0} ? 1 : 77)); }
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "SKIP: $c is not installed"; exit $((${fail:-0} ? 1 : 77)); }
	done
}
