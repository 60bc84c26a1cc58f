# shellcheck shell=bash disable=SC2034
# tools/lib/wl.sh - shared by the workload scripts tools/age, tools/install-verify,
# tools/bench-randrange and tools/bench-apps (sourced, not run): building, the filesystems
# under test, the zoned guest, commands.txt. The Python side (workloads, summaries, plots) is
# tools/lib/workloads.py (tools/lib/apps.py for tools/bench-apps).
#
# The script sets PROG and its defaults (BUILD, IMG_SIZE, ZONE_SIZE, FS_LIST, ...) first.
#
# Filesystems under test (--fs, comma separated), each made fresh by wl_prepare:
#   zlfs          host: a zlfs-emu image WORK/zlfs.img (--image-size, --zone-size, --max-open
#                 14 --max-active 14) mounted with -o dev_direct, as tools/bench
#                 (WL_BUFFERED=1: without it, the image file through the host page cache);
#                 in the zoned guest: mkfs.zlfs -f on the guest's zoned device
#   passthrough   host only: zlfs-passthrough over WORK/src, a directory of the host
#                 filesystem (tools/bench's baseline); its free space is the host's, so it
#                 never fills up or ages
#   passthrough-ext4
#                 host only: a baseline that fills up and ages like zlfs. A sparse file
#                 WORK/ext4.img of --image-size (the size of zlfs's image), mkfs.ext4 -q -F
#                 -b 4096 -m 0 (no blocks reserved for root: the whole image is usable, as
#                 the free space the workloads see) -E lazy_itable_init=0,lazy_journal_init=0
#                 (nothing written in the background), on a loop device with direct I/O on
#                 the image file (losetup --direct-io=on: like zlfs's -o dev_direct; the
#                 explicit form of mount -o loop) mounted on WORK/ext4, and zlfs-passthrough
#                 over WORK/ext4/src. Unmounting it unmounts the ext4 too (the loop device
#                 is set to detach itself then); the EXIT trap (wl_cleanup) does the same on
#                 an error or an interrupt and removes the image. Needs mkfs.ext4 (e2fsprogs)
#                 and root with loop devices; without loop devices it falls back to fuse2fs
#                 (ext4 in FUSE: a second FUSE layer, slower), and without that either it
#                 exits with 77. ZLFS_WL_EXT4=fuse2fs forces fuse2fs.
#   ext4          host only: that ext4 itself, without the passthrough (the kernel's own speed
#                 on the same image; the workload runs in WORK/ext4, BLKDEV is its loop device)
#   f2fs          guest only: kernel F2FS on the null_blk zoned disk, mkfs.f2fs -m (its
#                 metadata goes to the disk's conventional zones)
#   f2fs-conv     guest only: kernel F2FS on a conventional null_blk disk of the same size
#   f2fs-conv-model, ext4-conv-model
#                 --guest conv-model only: kernel F2FS (mkfs.f2fs) or ext4 (mkfs.ext4 -b 4096)
#                 on the emulator's conventional mode, an FTL on the NAND model (--model),
#                 served by zlfs-emu serve-nbd on the host and given to the guest as /dev/vda
#   dir:PATH      any mounted directory: the workload runs in PATH/zlfs-wl (removed after)
# --guest nullb|zns reruns the whole script inside tools/zoned-vm on a null_blk zoned disk or
# an NVMe ZNS namespace of --image-size (see docs/zoned-guest.md); plots are drawn on the host.
# --guest conv-model runs zlfs here on a zoned image with the timing model --model (default
# ufs40 with erase blocks of a quarter zone: a superblock of 4 dies is a zone) and then, for
# each kernel filesystem, the script again in a guest on a conventional image of the same
# model and capacity (--ftl: its FTL options); device-time figures (dev_* columns) come from
# the model, for both modes alike (docs/benchmarks.md, "Mode against mode").

WL_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WL_PY=$WL_REPO/tools/lib/workloads.py

die() { echo "$PROG: $*" >&2; exit 1; }
say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
log() { printf '%s\n' "$*" >>"$CMDS"; }

bytes() { # SIZE with an optional K, M, G, T suffix -> bytes
	local n=${1%[kKmMgGtT]} u=${1: -1}
	[[ $n =~ ^[0-9]+$ ]] || die "bad size $1"
	case $u in
	k|K) echo $((n << 10)) ;; m|M) echo $((n << 20)) ;; g|G) echo $((n << 30)) ;;
	t|T) echo $((n << 40)) ;; *) echo "$n" ;;
	esac
}

# ---- building ---------------------------------------------------------------------------------
wl_build() { # TARGETS...: build them in $BUILD unless --no-build; BIN is $BUILD/bin
	BUILD=$(realpath -m "$BUILD")
	BIN=$BUILD/bin
	if [[ $DO_BUILD == 1 ]]; then
		if [[ ! -f $BUILD/CMakeCache.txt ]]; then
			cmake -S "$WL_REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZLFS_TESTS=OFF >/dev/null
		fi
		cmake --build "$BUILD" -j"$(nproc)" --target "$@" >"$BUILD/$PROG-build.log" 2>&1 ||
			{ tail -20 "$BUILD/$PROG-build.log" >&2; die "build failed"; }
	fi
	local b
	for b in "$@"; do
		[[ -x $BIN/$b ]] || die "$BIN/$b is missing (build it, or drop --no-build)"
	done
}

# ---- the filesystems under test ---------------------------------------------------------------
DPID= # the FUSE daemon of the current mount, if any
MNT=  # where the current filesystem is mounted
DIR=  # where the workload runs (MNT, or PATH/zlfs-wl for dir:PATH)
CTL=  # zlfs-ctl stats works on MNT (zlfs only)
BLKDEV= # the block device under a kernel filesystem (its /sys/block/NAME/stat), or empty
CONV_DEV= # the conventional null_blk of f2fs-conv, created once per guest run

mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

wait_mounted() { # PID MNT
	local i
	for ((i = 0; i < 200; i++)); do
		mounted "$2" && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

wl_check_fs() { # FS: can it run here? dies with the reason if not
	case $1 in
	zlfs) ;;
	passthrough) [[ -z $GUEST_DEV ]] || die "passthrough is a host baseline: not in the guest" ;;
	passthrough-ext4|ext4)
		[[ -z $GUEST_DEV ]] || die "$1 is a host baseline: not in the guest"
		command -v mkfs.ext4 >/dev/null || {
			echo "$PROG: $1: mkfs.ext4 is not installed (apt-get install e2fsprogs)" >&2
			exit 77
		}
		ext4_can_loop || command -v fuse2fs >/dev/null || {
			echo "$PROG: $1 needs loop devices (root, /dev/loop-control, losetup) or fuse2fs (apt-get install fuse2fs); neither is here" >&2
			exit 77
		} ;;
	f2fs-conv-model|ext4-conv-model)
		[[ -n $GUEST_DEV ]] || die "$1 runs only in the guest (--guest conv-model)"
		[[ $(cat "/sys/block/${GUEST_DEV#/dev/}/queue/zoned" 2>/dev/null) == none ]] ||
			die "$1: $GUEST_DEV is not a conventional disk"
		command -v "mkfs.${1%%-*}" >/dev/null || die "$1: mkfs.${1%%-*} is not installed" ;;
	f2fs|f2fs-conv)
		[[ -n $GUEST_DEV ]] || die "$1 runs only in the zoned guest (--guest nullb)"
		[[ $GUEST_DEV == /dev/nullb* ]] || die "$1: F2FS on an NVMe ZNS namespace needs a second, conventional device for its metadata (mkfs.f2fs -c); use --guest nullb"
		command -v mkfs.f2fs >/dev/null || die "$1: mkfs.f2fs is not installed; the guest runs the host's tools (apt-get install f2fs-tools, or tools/install-deps --tests)" ;;
	dir:*) [[ -d ${1#dir:} ]] || die "$1: no such directory" ;;
	*) die "unknown filesystem '$1' (zlfs, passthrough, passthrough-ext4, ext4, f2fs, f2fs-conv, f2fs-conv-model, ext4-conv-model, dir:PATH)" ;;
	esac
}

# ---- options every workload takes -------------------------------------------------------------
MODEL= FTL= DEV_CONTROL= APPEND=0 NO_SUMMARY=0

wl_opt() { # ARGS...: one of the shared options at $1 (WL_SHIFT: words it took), else false
	WL_SHIFT=2
	case $1 in
	--model) MODEL=$2 ;;
	--ftl) FTL=$2 ;;
	--dev-control) DEV_CONTROL=$2 ;;
	--append) APPEND=1 WL_SHIFT=1 ;;     # internal: add to the CSV a run before started
	--no-summary) NO_SUMMARY=1 WL_SHIFT=1 ;; # internal: the caller summarises
	*) return 1 ;;
	esac
	[[ $WL_SHIFT == 1 || $# -ge 2 ]] || die "$1 needs a value"
}

# MODEL from the zone size unless given: erase blocks of a quarter zone (4 dies: a zone is one
# superblock), and the erase time of ufs40's 16 MiB block (3 ms) scaled with the block, so that
# a scaled-down device spends the same share of its time erasing as a full-size one
wl_model_default() {
	local block
	[[ -z $MODEL ]] || return 0
	block=$(($(bytes "$ZONE_SIZE") / 4))
	MODEL="ufs40,block=$((block >> 10))K,erase=$((3000 * block / (16 << 20)))us"
}

wl_dev_args() { # the workload's arguments for device-time figures, into DEV_ARGS
	DEV_ARGS=()
	[[ -z $DEV_CONTROL ]] || DEV_ARGS=(--dev-control "$DEV_CONTROL")
	[[ -z $CTL ]] || DEV_ARGS=(--ctl "$CTL" --mnt "$MNT")
}

wl_dev_snap() { # FILE [--sync]: the device model's counters now (an empty FILE without one)
	local f=$1
	shift
	wl_dev_args
	python3 "$WL_PY" dev-snap "$f" "${DEV_ARGS[@]}" "$@" || die "cannot read the device model's counters"
}

conv_nullb() { # a conventional null_blk of GUEST_SIZE bytes in the guest -> CONV_DEV
	[[ -n $CONV_DEV ]] && return 0
	local k=0 d
	while [[ -e /sys/kernel/config/nullb/nullb$k || -e /dev/nullb$k ]]; do k=$((k + 1)); done
	d=/sys/kernel/config/nullb/nullb$k
	mkdir "$d" || die "cannot create $d (null_blk configfs)"
	echo $((GUEST_SIZE >> 20)) >"$d/size"
	local kv
	for kv in blocksize=4096 memory_backed=1 irqmode=0 completion_nsec=0 power=1; do
		echo "${kv#*=}" >"$d/${kv%%=*}" || die "conventional null_blk: ${kv%%=*}"
	done
	for ((kv = 0; kv < 100; kv++)); do [[ -b /dev/nullb$k ]] && break; sleep 0.1; done
	[[ -b /dev/nullb$k ]] || die "/dev/nullb$k did not appear"
	CONV_DEV=/dev/nullb$k
}

# ---- passthrough-ext4: a host baseline with a capacity of its own -----------------------------
EXT4_IMG= # the image file (WORK/ext4.img) while it exists
EXT4_MNT= # where the ext4 is mounted (WORK/ext4) while it is
EXT4_LOOP= # its loop device, or empty (fuse2fs)
EXT4_PID= # the fuse2fs daemon, or empty (a loop device)

ext4_can_loop() { # root, loop devices and losetup (and not ZLFS_WL_EXT4=fuse2fs)
	[[ $EUID == 0 && -e /dev/loop-control && ${ZLFS_WL_EXT4:-} != fuse2fs ]] && command -v losetup >/dev/null
}

wl_ext4_ok() { # can passthrough-ext4 run here? (for a default list: no message)
	[[ -z ${GUEST_DEV:-} ]] && command -v mkfs.ext4 >/dev/null && { ext4_can_loop || command -v fuse2fs >/dev/null; }
}

ext4_make() { # TAG: a fresh ext4 of IMG_SIZE in the sparse file WORK/ext4.img
	local tag=$1 mkfs_opts=(-q -F -b 4096 -m 0 -E "lazy_itable_init=0,lazy_journal_init=0")
	EXT4_IMG=$WORK/ext4.img
	rm -f "$EXT4_IMG"
	log "truncate -s $(bytes "$IMG_SIZE") $EXT4_IMG   # $tag: sparse, the size of zlfs's image"
	truncate -s "$(bytes "$IMG_SIZE")" "$EXT4_IMG" || die "cannot create $EXT4_IMG"
	log "mkfs.ext4 ${mkfs_opts[*]} $EXT4_IMG"
	mkfs.ext4 "${mkfs_opts[@]}" "$EXT4_IMG" >"$OUT/mkfs-$tag.log" 2>&1 ||
		{ tail -5 "$OUT/mkfs-$tag.log" >&2; die "mkfs.ext4 $EXT4_IMG failed"; }
}

ext4_attach() { # mount WORK/ext4.img on WORK/ext4: a loop device, else fuse2fs; sets BLKDEV
	local dio
	EXT4_IMG=$WORK/ext4.img EXT4_MNT=$WORK/ext4
	mkdir -p "$EXT4_MNT"
	! mounted "$EXT4_MNT" || umount "$EXT4_MNT" || die "$EXT4_MNT is mounted and busy"
	if ext4_can_loop; then
		if EXT4_LOOP=$(losetup --find --show --direct-io=on "$EXT4_IMG" 2>>"$DLOG"); then
			dio=$(losetup -n -O DIO "$EXT4_LOOP" 2>/dev/null | tr -d ' ')
			log "losetup --find --show --direct-io=on $EXT4_IMG   # $EXT4_LOOP, direct I/O ${dio:-?}"
			log "mount -t ext4 $EXT4_LOOP $EXT4_MNT"
			if mount -t ext4 "$EXT4_LOOP" "$EXT4_MNT" 2>>"$DLOG"; then
				# detach now: a device in use is only marked to detach itself once released
				# (autoclear, as mount -o loop sets it), so no way out, kill -9 included,
				# leaves it behind once the ext4 is unmounted
				log "losetup -d $EXT4_LOOP   # autoclear: detached at the unmount"
				losetup -d "$EXT4_LOOP" 2>>"$DLOG" || say "losetup -d $EXT4_LOOP failed: detached at the cleanup"
				BLKDEV=${EXT4_LOOP#/dev/}
				return 0
			fi
			losetup -d "$EXT4_LOOP" 2>/dev/null || true
			EXT4_LOOP=
		fi
		command -v fuse2fs >/dev/null ||
			{ tail -3 "$DLOG" >&2; die "passthrough-ext4: cannot loop-mount $EXT4_IMG (log: $DLOG), and fuse2fs is not installed (apt-get install fuse2fs)"; }
		say "passthrough-ext4: cannot loop-mount $EXT4_IMG (log: $DLOG): fuse2fs instead"
	fi
	log "fuse2fs -f $EXT4_IMG $EXT4_MNT   # no loop device: ext4 in FUSE, under the passthrough"
	fuse2fs -f "$EXT4_IMG" "$EXT4_MNT" >>"$DLOG" 2>&1 &
	EXT4_PID=$!
	wait_mounted "$EXT4_PID" "$EXT4_MNT" || { tail -5 "$DLOG" >&2; die "fuse2fs $EXT4_IMG did not mount (log: $DLOG)"; }
}

ext4_detach() { # unmount WORK/ext4 and detach its loop device or stop fuse2fs; idempotent
	local i back
	if [[ -n $EXT4_MNT ]] && mounted "$EXT4_MNT"; then
		for ((i = 0; i < 50; i++)); do
			umount "$EXT4_MNT" 2>/dev/null && break
			sleep 0.2
		done
		if mounted "$EXT4_MNT"; then
			say "$EXT4_MNT stays busy: lazy unmount (its loop device detaches itself when released)"
			umount -l "$EXT4_MNT" || true
		fi
	fi
	if [[ -n $EXT4_LOOP ]]; then
		# still bound to our image (losetup -d failed after the mount)? never touch another's
		back=$(losetup -n -O BACK-FILE "$EXT4_LOOP" 2>/dev/null) || back=
		back=${back%% (deleted)}
		if [[ -n $back && $(realpath -m "$back") == "$(realpath -m "$EXT4_IMG")" ]]; then
			losetup -d "$EXT4_LOOP" 2>/dev/null || say "cannot detach $EXT4_LOOP (busy: it detaches itself when released)"
		fi
	fi
	if [[ -n $EXT4_PID ]]; then
		wait "$EXT4_PID" 2>/dev/null || say "fuse2fs exited with an error (log: $DLOG)"
	fi
	EXT4_MNT='' EXT4_LOOP='' EXT4_PID=''
	return 0
}

wl_settle() { # after deleting files under WORK: the host frees their blocks now, not under the
	# next measurement (with online discard, -o discard, a journal commit sends gigabytes of
	# discards and the disk serves them first)
	sync -f "$WORK" 2>/dev/null || sync
}

wl_prepare() { # FS TAG: a fresh, empty FS mounted; sets MNT DIR CTL BLKDEV DPID
	local fs=$1 tag=$2
	MNT=$WORK/mnt-$tag DIR='' CTL='' BLKDEV=''
	DLOG=$OUT/daemon-$tag.log
	case $fs in
	dir:*)
		MNT=${fs#dir:} DIR=$MNT/zlfs-wl
		rm -rf "$DIR"
		mkdir -p "$DIR" || die "cannot create $DIR"
		log "mkdir $DIR   # $tag: dir:$MNT"
		return 0 ;;
	zlfs)
		if [[ -n $GUEST_DEV ]]; then
			log "$BIN/mkfs.zlfs -f -q ${ZLFS_MKFS_OPTS:-} $GUEST_DEV"
			"$BIN/mkfs.zlfs" -f -q ${ZLFS_MKFS_OPTS:-} "$GUEST_DEV" || die "mkfs.zlfs $GUEST_DEV failed"
		else
			local img=$WORK/zlfs.img
			rm -f "$img"
			wl_settle
			log "$BIN/zlfs-emu create $img --size $IMG_SIZE --zone-size $ZONE_SIZE --max-open 14 --max-active 14${MODEL:+ --timing $MODEL}"
			"$BIN/zlfs-emu" create "$img" --size "$IMG_SIZE" --zone-size "$ZONE_SIZE" \
				--max-open 14 --max-active 14 ${MODEL:+--timing "$MODEL"} >/dev/null ||
				die "zlfs-emu create failed"
			log "$BIN/mkfs.zlfs -q ${ZLFS_MKFS_OPTS:-} $img"
			"$BIN/mkfs.zlfs" -q ${ZLFS_MKFS_OPTS:-} "$img" || die "mkfs.zlfs $img failed"
		fi ;;
	passthrough)
		rm -rf "$WORK/src"
		mkdir -p "$WORK/src" ;;
	passthrough-ext4|ext4) ext4_make "$tag" ;;
	f2fs)
		log "mkfs.f2fs -f -m $GUEST_DEV"
		mkfs.f2fs -f -m "$GUEST_DEV" >"$OUT/mkfs-$tag.log" 2>&1 ||
			{ tail -5 "$OUT/mkfs-$tag.log" >&2; die "mkfs.f2fs -m $GUEST_DEV failed (it needs conventional zones for its metadata: --conv)"; } ;;
	f2fs-conv-model)
		log "mkfs.f2fs -f $GUEST_DEV   # the conventional model over NBD"
		mkfs.f2fs -f "$GUEST_DEV" >"$OUT/mkfs-$tag.log" 2>&1 ||
			{ tail -5 "$OUT/mkfs-$tag.log" >&2; die "mkfs.f2fs $GUEST_DEV failed"; } ;;
	ext4-conv-model)
		log "mkfs.ext4 -q -F -b 4096 -m 0 -E lazy_itable_init=0,lazy_journal_init=0 $GUEST_DEV"
		mkfs.ext4 -q -F -b 4096 -m 0 -E lazy_itable_init=0,lazy_journal_init=0 "$GUEST_DEV" \
			>"$OUT/mkfs-$tag.log" 2>&1 || { tail -5 "$OUT/mkfs-$tag.log" >&2; die "mkfs.ext4 $GUEST_DEV failed"; } ;;
	f2fs-conv)
		conv_nullb
		log "mkfs.f2fs -f $CONV_DEV   # conventional null_blk, $((GUEST_SIZE >> 20)) MiB"
		mkfs.f2fs -f "$CONV_DEV" >"$OUT/mkfs-$tag.log" 2>&1 ||
			{ tail -5 "$OUT/mkfs-$tag.log" >&2; die "mkfs.f2fs $CONV_DEV failed"; } ;;
	esac
	wl_mount "$fs" "$tag"
}

wl_mount() { # FS TAG: mount what wl_prepare made (again)
	local fs=$1 tag=$2 dev
	MNT=$WORK/mnt-$tag DIR=$WORK/mnt-$tag CTL='' BLKDEV=''
	DLOG=$OUT/daemon-$tag.log
	case $fs in dir:*) MNT=${fs#dir:} DIR=$MNT/zlfs-wl; return 0 ;; esac
	mkdir -p "$MNT"
	! mounted "$MNT" || fusermount3 -u "$MNT" || umount "$MNT" || die "$MNT is mounted and busy"
	case $fs in
	zlfs)
		dev=${GUEST_DEV:-$WORK/zlfs.img}
		# a kernel zoned device is always O_DIRECT (libzbd); the emulator's image needs dev_direct
		local opts=
		[[ -n $GUEST_DEV || ${WL_BUFFERED:-0} == 1 ]] || opts=dev_direct
		opts+=${ZLFS_OPTS:+${opts:+,}$ZLFS_OPTS}
		log "$BIN/zlfs -f ${opts:+-o $opts }$dev $MNT   # $tag"
		"$BIN/zlfs" -f ${opts:+-o "$opts"} "$dev" "$MNT" >>"$DLOG" 2>&1 &
		DPID=$!
		CTL=$BIN/zlfs-ctl ;;
	passthrough)
		log "$BIN/zlfs-passthrough -f $WORK/src $MNT   # $tag"
		"$BIN/zlfs-passthrough" -f "$WORK/src" "$MNT" >>"$DLOG" 2>&1 &
		DPID=$! ;;
	ext4)
		ext4_attach
		MNT=$EXT4_MNT DIR=$EXT4_MNT
		[[ -z $EXT4_PID ]] || say "ext4: no loop device here: ext4 in FUSE (fuse2fs), not the kernel's"
		log "# $tag: the workload runs in $EXT4_MNT"
		return 0 ;;
	passthrough-ext4)
		ext4_attach
		mkdir -p "$EXT4_MNT/src" || die "cannot create $EXT4_MNT/src"
		log "$BIN/zlfs-passthrough -f $EXT4_MNT/src $MNT   # $tag: over the ext4 of $EXT4_IMG"
		"$BIN/zlfs-passthrough" -f "$EXT4_MNT/src" "$MNT" >>"$DLOG" 2>&1 &
		DPID=$! ;;
	f2fs|f2fs-conv|f2fs-conv-model|ext4-conv-model)
		local type=${fs%%-*}
		dev=$GUEST_DEV
		[[ $fs != f2fs-conv ]] || dev=$CONV_DEV
		log "mount -t $type $dev $MNT   # $tag"
		mount -t "$type" "$dev" "$MNT" 2>>"$DLOG" || { cat "$DLOG" >&2; die "mount -t $type $dev failed"; }
		BLKDEV=${dev#/dev/}
		return 0 ;;
	esac
	wait_mounted "$DPID" "$MNT" || { tail -5 "$DLOG" >&2; die "$tag: $fs did not mount (log: $DLOG)"; }
}

wl_unmount() { # unmount MNT and wait for its daemon, then the ext4 under passthrough-ext4;
	# fails if the daemon did not exit with 0
	local rc=0 i
	[[ -n $MNT && -n $DIR && $DIR != "$MNT" ]] && { MNT='' DIR=''; return 0; } # dir:PATH
	[[ -n $MNT ]] || { ext4_detach; return 0; }
	if mounted "$MNT"; then
		for ((i = 0; i < 50; i++)); do
			if [[ -n $DPID ]]; then fusermount3 -u "$MNT" 2>/dev/null && break
			else umount "$MNT" 2>/dev/null && break; fi
			sleep 0.2 # busy: a reader still closing its files
		done
		if mounted "$MNT"; then
			say "$MNT stays busy: lazy unmount"
			if [[ -n $DPID ]]; then fusermount3 -uz "$MNT" || true; else umount -l "$MNT" || true; fi
		fi
	fi
	if [[ -n $DPID ]]; then
		wait "$DPID" || rc=$?
		[[ $rc == 0 ]] || say "daemon $DPID exited with status $rc (log: $DLOG)"
	fi
	DPID='' MNT='' DIR=''
	ext4_detach
	return $rc
}

wl_cleanup() {
	local p
	wl_server_stop
	# the workload runs in the background (wl_run): SIGINT is ignored there, TERM stops it
	for p in ${WL_CHILD:-}; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	WL_CHILD=
	if [[ -n ${DIR:-} && -n ${MNT:-} && $DIR != "$MNT" ]]; then rm -rf "$DIR"; fi
	wl_unmount || true
	ext4_detach
	[[ -z ${WORK:-} || -n ${GUEST_DEV:-} ]] || rm -f "$WORK/zlfs.img"
	[[ -z ${WORK:-} ]] || rm -rf "$WORK/src"
	if [[ -n ${WORK:-} && -z ${GUEST_DEV:-} ]]; then # the ext4 image, once nothing has it mounted
		mounted "$WORK/ext4" || { rm -f "$WORK/ext4.img"; rmdir "$WORK/ext4" 2>/dev/null || true; }
	fi
}

wl_run() { # CMD...: in the background and waited for, so ^C and TERM reach the trap at once
	"$@" &
	WL_CHILD=$!
	local rc=0
	wait "$WL_CHILD" || rc=$?
	WL_CHILD=
	return $rc
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

wl_stats() { # FILE: zlfs-ctl stats of the current zlfs mount, or nothing
	[[ -n $CTL ]] || return 0
	"$CTL" stats "$MNT" >"$1" || die "zlfs-ctl stats $MNT failed"
}

# ---- commands.txt -----------------------------------------------------------------------------
wl_header() { # ARGS: what the run was started with
	{
		echo "# $PROG $(date -u +%Y-%m-%dT%H:%M:%SZ): $*"
		echo "# host: nproc=$(nproc) mem=$(awk '/MemTotal/ { printf "%.1fGiB", $2 / 1048576 }' /proc/meminfo)" \
			"kernel=$(uname -r)${GUEST_DEV:+ (zoned guest, device $GUEST_DEV)}"
		echo "# workdir: $WORK on $(df -P "$WORK" | awk 'NR == 2 { print $1 " (" $6 ")" }')"
		echo "# zlfs commit: $(git -C "$WL_REPO" rev-parse HEAD 2>/dev/null || echo none)," \
			"uncommitted changes in fs/: $(git -C "$WL_REPO" status --porcelain -- fs 2>/dev/null |
			awk '{ printf "%s%s", n++ ? " " : "", $2 } END { if (!n) printf "none" }')"
		[[ ! -x ${BIN:-/nonexistent}/zlfs ]] ||
			echo "# binaries: $BIN/zlfs built $(date -u -r "$BIN/zlfs" +%Y-%m-%dT%H:%M:%SZ)," \
				"sha256 $(sha256sum "$BIN/zlfs" | cut -c1-16)$([[ $DO_BUILD == 1 ]] || echo ", --no-build")"
	} >>"$CMDS"
}

# ---- the zoned guest --------------------------------------------------------------------------
# wl_guest KIND ARGS...: rerun this script in tools/zoned-vm with a zoned device of IMG_SIZE
# (KIND nullb or zns) and --in-guest DEV ARGS; the results land in OUT (shared writable).
wl_guest() {
	local kind=$1 mb conv zones zb mem spec dev
	shift
	mb=$(($(bytes "$IMG_SIZE") >> 20))
	zb=$(($(bytes "$ZONE_SIZE") >> 20))
	((mb > 0 && zb > 0 && mb % zb == 0)) || die "--image-size must be a multiple of --zone-size in the guest"
	zones=$((mb / zb))
	case $kind in
	nullb)
		# F2FS keeps its metadata in the conventional zones: 6% of them, at least 8
		conv=$(((zones * 6 + 99) / 100)); ((conv >= 8)) || conv=8
		spec="--nullb size=${mb}M,zone_size=${zb}M,conv=$conv,max_open=14,max_active=14"
		dev=/dev/nullb0
		# room for the null_blk disks (RAM-backed): the zoned one and, for f2fs-conv, another
		mem=$((1024 + mb))
		[[ ,$FS_LIST, != *,f2fs-conv,* ]] || mem=$((mem + mb)) ;;
	zns)
		spec="--zns size=${mb}M,zone_size=${zb}M,max_open=14,max_active=14"
		dev=/dev/nvme0n1
		mem=1536 ;;
	*) die "--guest nullb|zns|conv-model" ;;
	esac
	wl_vm_check
	mkdir -p "$OUT"
	say "rerunning in the zoned guest ($kind: $IMG_SIZE, ${zb} MiB zones${conv:+, $conv conventional}, ${mem} MiB guest)"
	# shellcheck disable=SC2086
	"$WL_REPO/tools/zoned-vm" $spec -m "$mem" $(wl_shares) --timeout "${GUEST_TIMEOUT:-14400}" \
		-e "ZLFS_WL_GUEST_SIZE=$((mb << 20))" -C "$WL_REPO" -- "$0" --in-guest "$dev" "$@"
}

wl_vm_check() { # exit 77 unless the guest can run here
	[[ -x $WL_REPO/tools/zoned-vm ]] || die "tools/zoned-vm is missing"
	"$WL_REPO/tools/zoned-vm" --check >/dev/null 2>&1 || {
		"$WL_REPO/tools/zoned-vm" --check >&2 || true
		echo "$PROG: the zoned guest cannot run here (tools/zoned-vm --setup fetches its kernel)" >&2
		exit 77
	}
}

# The guest has its own /tmp and /run: the checkout and the build, when they live there, are
# shared with it (before OUT, which may lie inside them), as the results directory always is.
wl_shares() {
	local d
	for d in "$WL_REPO" "$BUILD"; do
		case $d/ in /tmp/* | /run/*) printf -- '-w %s ' "$d" ;; esac
	done
	printf -- '-w %s' "$OUT"
}

# wl_guest_main CSV ARGS...: the run in the guest (--guest nullb|zns|conv-model) with the
# command line ARGS; then, here, summarise (the script's function) the CSV of OUT. Exits.
wl_guest_main() {
	local csv=$1 a skip=0 rc=0 fs
	shift
	for fs in ${FS_LIST//,/ }; do [[ $fs != passthrough* && $fs != dir:* ]] ||
		die "$fs is a host filesystem: not with --guest"; done
	wl_build zlfs zlfs-emu mkfs.zlfs zlfs-ctl
	mkdir -p "$OUT"
	GUEST_ARGS=()
	for a in "$@"; do # the same run, minus what the guest run is given anew
		if ((skip)); then skip=0; continue; fi
		case $a in --guest|--out|--workdir|--build|--fs) skip=1; continue ;; esac
		GUEST_ARGS+=("$a")
	done
	if [[ $GUEST == conv-model ]]; then
		wl_conv_model "${GUEST_ARGS[@]}" || rc=$?
	else
		wl_guest "$GUEST" --no-build --build "$BUILD" --out "$OUT" --fs "$FS_LIST" "${GUEST_ARGS[@]}" || rc=$?
	fi
	[[ -s $OUT/$csv ]] || exit $((rc ? rc : 1))
	summarise "$OUT/$csv"
	exit $rc
}

wl_fs_default() { # FS_LIST, unless given: by where the run is (HOST_DEFAULT on the host)
	[[ -z $FS_LIST ]] || return 0
	case ${GUEST:-${GUEST_DEV:+in}} in
	'') FS_LIST=$1 ;;
	nullb) FS_LIST=zlfs,f2fs,f2fs-conv ;;
	zns) FS_LIST=zlfs ;;
	conv-model) FS_LIST=zlfs,f2fs-conv-model ;;
	in) case $GUEST_DEV in /dev/nullb*) FS_LIST=zlfs,f2fs,f2fs-conv ;; *) FS_LIST=zlfs ;; esac ;;
	esac
}

# ---- --guest conv-model: the two modes of one NAND model --------------------------------------
SERVER_PID=

wl_server_stop() {
	[[ -n $SERVER_PID ]] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null || say "the NBD server exited with an error (log: $OUT/server.log)"
	SERVER_PID=
}

# wl_conv_model ARGS...: zlfs here on the zoned model (--fs zlfs), then each kernel
# filesystem of FS_LIST in its own guest on a fresh conventional image of the same model and
# capacity, served over NBD; all rows go to the one CSV of OUT. ARGS: the run's options
# without --guest, --out, --workdir, --build, --fs.
wl_conv_model() {
	local fs kfs=() rc=0 img sock mem work
	wl_model_default
	for fs in ${FS_LIST//,/ }; do
		case $fs in
		zlfs) ;;
		f2fs-conv-model|ext4-conv-model) kfs+=("$fs") ;;
		*) die "$fs does not run with --guest conv-model (zlfs, f2fs-conv-model, ext4-conv-model)" ;;
		esac
	done
	((${#kfs[@]} == 0)) || wl_vm_check
	work=$(realpath -m "${WORK:-$BUILD/$PROG-work}")
	mkdir -p "$OUT" "$work"
	if [[ ,$FS_LIST, == *,zlfs,* ]]; then
		say "zlfs on the zoned model ($MODEL)"
		"$0" --no-build --build "$BUILD" --out "$OUT" --workdir "$work" --fs zlfs --model "$MODEL" \
			--no-summary "$@" || return
	fi
	trap wl_server_stop EXIT
	for fs in "${kfs[@]}"; do
		img=$work/conv.img sock=$work/conv.sock
		rm -f "$img"
		"$BIN/zlfs-emu" create "$img" --mode conventional --size "$IMG_SIZE" --zone-size "$ZONE_SIZE" \
			--timing "$MODEL" ${FTL:+--ftl "$FTL"} >/dev/null || die "zlfs-emu create --mode conventional failed"
		echo "# $fs: $BIN/zlfs-emu create $img --mode conventional --size $IMG_SIZE --zone-size $ZONE_SIZE --timing $MODEL${FTL:+ --ftl $FTL}" >>"$OUT/commands.txt"
		echo "# $fs: $BIN/zlfs-emu serve-nbd $img $sock --stats $OUT/devstats-$fs.json" >>"$OUT/commands.txt"
		"$BIN/zlfs-emu" serve-nbd "$img" "$sock" --stats "$OUT/devstats-$fs.json" 2>>"$OUT/server.log" &
		SERVER_PID=$!
		for _ in $(seq 100); do [[ -S $sock.ctl ]] && break; sleep 0.1; done
		[[ -S $sock.ctl ]] || die "the NBD server did not start (log: $OUT/server.log)"
		mem=$((1536 + ($(bytes "$IMG_SIZE") >> 24)))
		say "$fs on the conventional model ($IMG_SIZE, $MODEL), in the guest"
		# shellcheck disable=SC2046
		"$WL_REPO/tools/zoned-vm" --nbd "$sock" --no-devices -m "$mem" $(wl_shares) \
			--timeout "${GUEST_TIMEOUT:-14400}" -C "$WL_REPO" -- "$0" --in-guest /dev/vda \
			--dev-control auto --append --no-summary --no-build --build "$BUILD" --out "$OUT" \
			--fs "$fs" --model "$MODEL" "$@" || rc=$?
		wl_server_stop
		rm -f "$img"
		((rc == 0)) || break
	done
	trap - EXIT
	return $rc
}
