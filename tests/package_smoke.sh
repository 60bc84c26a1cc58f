#!/usr/bin/env bash
# package_smoke.sh BUILD_DIR - the Debian package and the manual pages.
#   1. `cpack -G DEB` in BUILD_DIR makes one .deb whose Depends names libfuse3, fuse3, libzbd,
#      libssl and libxxhash;
#   2. unpacked into a scratch root (dpkg -x), it holds the seven programs in usr/sbin and
#      usr/bin and the seven pages in usr/share/man;
#   3. `man -l` formats every page without a warning, each page has the sections of a system
#      page, and every option and command the program's --help lists appears in its page.
# Exit 77 (skipped) when cpack, dpkg-deb or man is missing.
set -uo pipefail
BUILD=$(cd "${1:?usage: package_smoke.sh BUILD_DIR}" && pwd)
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/package
for c in cpack dpkg-deb man; do
	command -v "$c" >/dev/null || { echo "SKIP: no $c (tools/install-deps --tests)"; exit 77; }
done
rm -rf "$T"
mkdir -p "$T/root"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- 1. the package -----------------------------------------------------------------------
(cd "$T" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$T/out" >"$T/cpack.log" 2>&1) ||
	{ tail -20 "$T/cpack.log"; echo "FAIL: cpack -G DEB"; exit 1; }
debs=("$T"/out/*.deb)
[[ ${#debs[@]} == 1 && -f ${debs[0]} ]] || { echo "FAIL: expected one .deb, got: ${debs[*]}"; exit 1; }
DEB=${debs[0]}
echo "package: $(basename "$DEB")"
depends=$(dpkg-deb -f "$DEB" Depends)
echo "Depends: $depends"
for d in libfuse3 fuse3 libzbd libssl libxxhash liblz4 libzstd; do
	grep -Eq "(^|, )$d[^,]*" <<<"$depends" || bad "Depends does not name $d"
done
[[ $(dpkg-deb -f "$DEB" Package) == zlfs ]] || bad "the package is not called zlfs"

# ---- 2. unpacked ----------------------------------------------------------------------------
dpkg -x "$DEB" "$T/root" || { echo "FAIL: dpkg -x"; exit 1; }
R=$T/root/usr
for p in sbin/zlfs sbin/mkfs.zlfs sbin/resize.zlfs sbin/fsck.zlfs sbin/zlfs-dump bin/zlfs-ctl \
	bin/zlfs-emu; do
	[[ -x $R/$p ]] || bad "$p is not in the package"
done
declare -A page=([zlfs]=man8/zlfs.8 [mkfs.zlfs]=man8/mkfs.zlfs.8 [resize.zlfs]=man8/resize.zlfs.8
		 [fsck.zlfs]=man8/fsck.zlfs.8
		 [zlfs-dump]=man8/zlfs-dump.8
		 [zlfs-ctl]=man8/zlfs-ctl.8 [zlfs-emu]=man1/zlfs-emu.1)
declare -A prog=([zlfs]=sbin/zlfs [mkfs.zlfs]=sbin/mkfs.zlfs [resize.zlfs]=sbin/resize.zlfs
		 [fsck.zlfs]=sbin/fsck.zlfs
		 [zlfs-dump]=sbin/zlfs-dump
		 [zlfs-ctl]=bin/zlfs-ctl [zlfs-emu]=bin/zlfs-emu)

# ---- 3. the pages ---------------------------------------------------------------------------
# What --help lists: long and short options, "-o name" and "name=" options of the daemon, and
# the commands of zlfs-ctl and zlfs-emu.
help_words() {
	local help=$1
	grep -oE '(^|[ ,[|])--?[A-Za-z][A-Za-z0-9-]*' "$help" | sed -E 's/^[ ,[|]//'
	grep -oE '^ {4}[a-z_]+(=|\b)' "$help" | sed -E 's/^ +//; s/=$//'
	grep -oE '(^| )-o [a-z_]+' "$help" | sed -E 's/^ ?-o //'
	grep -oE '^(usage: zlfs-ctl | +zlfs-ctl |  )[a-z-]+ [A-Z]' "$help" |
		sed -E 's/^(usage: zlfs-ctl | +zlfs-ctl | +)//; s/ [A-Z]$//'
}
for name in "${!page[@]}"; do
	f=$R/share/man/${page[$name]}.gz
	[[ -f $f ]] || { bad "${page[$name]}.gz is not in the package"; continue; }
	MANWIDTH=100 man -l "$f" >"$T/$name.txt" 2>"$T/$name.err" || bad "man -l ${page[$name]} failed"
	[[ -s $T/$name.err ]] && { bad "man -l ${page[$name]} warned:"; cat "$T/$name.err"; }
	for sec in NAME SYNOPSIS DESCRIPTION "EXIT STATUS" EXAMPLES "SEE ALSO"; do
		grep -q "^$sec" "$T/$name.txt" || bad "${page[$name]}: no $sec section"
	done
	grep -q '^OPTIONS\|^COMMANDS' "$T/$name.txt" || bad "${page[$name]}: no OPTIONS section"
	"$R/${prog[$name]}" --help >"$T/$name.help" 2>&1 || bad "$name --help failed"
	n=0
	while read -r w; do
		n=$((n + 1))
		grep -qF -- "$w" "$T/$name.txt" || bad "$name: '$w' from --help is not in ${page[$name]}"
	done < <(help_words "$T/$name.help" | sort -u)
	((n >= 5)) || bad "$name: only $n options found in --help (the extraction is broken)"
	echo "$name: ${page[$name]} formats; in it, all $n of --help: $(help_words "$T/$name.help" |
		sort -u | tr '\n' ' ')"
done

[[ $fail == 0 ]] && echo "1 passed, 0 failed" || echo "FAIL"
exit $fail
