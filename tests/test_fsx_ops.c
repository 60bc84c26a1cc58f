/*
 * test_fsx_ops.c - the operations of test_fsx, each checked against the model and recorded
 * in the log: writes and reads (plain, O_DIRECT, through a shared mapping), truncation, hole
 * punching, fallocate (mode 0, KEEP_SIZE, ZERO_RANGE), COLLAPSE_RANGE and INSERT_RANGE,
 * fsync, reopening and a checkpoint; how offsets and lengths are picked. Part of test_fsx
 * (test_fsx.c).
 */
#include "fsx_testutil.h"

#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Weights of the operations the loop picks from (remounts come on their own schedule). */
static const unsigned op_weight[OP_NKINDS] = {
	[OP_WRITE] = 26, [OP_READ] = 20, [OP_TRUNC] = 6, [OP_PUNCH] = 7, [OP_FALLOC] = 5,
	[OP_FSYNC] = 4, [OP_DWRITE] = 7, [OP_DREAD] = 7, [OP_MREAD] = 5, [OP_MWRITE] = 5,
	[OP_REOPEN] = 2, [OP_CKPT] = 1, [OP_KEEP] = 3, [OP_ZERO] = 4, [OP_COLLAPSE] = 3,
	[OP_INSERT] = 3};

/* ---- the operations ------------------------------------------------------------------------- */

static uint64_t pick_len(uint64_t max)
{
	switch (rnd(8)) {
	case 0: case 1: case 2:
		return 1 + rnd(max < 512 ? max : 512);
	case 3: case 4:
		return 1 + rnd(16384);
	case 5: case 6:
		return 1 + rnd(128 << 10);
	default:
		return 1 + rnd(max);
	}
}

/* Near where block addresses move from the inode to its direct nodes (977 blocks in) or to
 * the indirect level (3001 blocks in). */
static uint64_t near_level(int f)
{
	uint64_t at = (3001 * BLK < MAXSZ(f) && rnd(2) ? 3001 : 977) * (uint64_t)BLK;

	return at - 8192 + rnd(16384);
}

static uint64_t pick_off(int f, uint64_t size)
{
	switch (rnd(10)) {
	case 0: case 1: case 2: case 3:
		return rnd(size + 1);
	case 4:
		return near_level(f);
	case 5: case 6: /* around EOF */
		return size - (size < 8192 ? size : 8192) + rnd(16384);
	case 7: case 8: /* past EOF: a hole */
		return size + rnd(2 << 20);
	default:
		return rnd(MAXSZ(f));
	}
}

/* A range for file F: ALIGN 0 any, 1 a multiple of 512, 2 of BLK (both ends). The range
 * stays inside the file's largest size and is never empty. */
static void pick_range(int f, int align, uint64_t maxlen, uint64_t *off, uint64_t *len)
{
	uint64_t a = align == 2 ? BLK : align == 1 ? 512 : 1;
	uint64_t o = pick_off(f, S.size[f]), l = pick_len(maxlen);

	if (o > MAXSZ(f) - a)
		o = MAXSZ(f) - a;
	o -= o % a;
	if (l > MAXSZ(f) - o)
		l = MAXSZ(f) - o;
	l -= l % a;
	if (!l)
		l = a;
	*off = o;
	*len = l;
}

static int pick_align(void)
{
	uint64_t r = rnd(10);

	return r < 3 ? 2 : r < 4 ? 1 : 0;
}

static void model_write(int f, const uint8_t *b, uint64_t off, uint64_t len)
{
	memcpy(S.model[f] + off, b, len);
	if (off + len > S.size[f])
		S.size[f] = off + len;
	S.bytes_written += len;
}

static void model_resize(int f, uint64_t size)
{
	if (size < S.size[f])
		memset(S.model[f] + size, 0, S.size[f] - size);
	S.size[f] = size;
}

/* O_DIRECT: mostly block-aligned, sometimes not (FUSE does not ask for alignment), unless
 * the kernel refused an unaligned one. */
static int dio_align(void)
{
	return S.dio_aligned_only || rnd(4) ? 2 : pick_align();
}

static int dio_refused(int align, ssize_t n)
{
	if (n >= 0 || errno != EINVAL || align == 2)
		return 0;
	printf("fsx: an unaligned O_DIRECT request failed with EINVAL: aligned ones only from "
	       "now on\n");
	S.dio_aligned_only = 1;
	return 1;
}

static void op_write(int f, int direct)
{
	int align = direct ? dio_align() : pick_align();
	uint64_t off, len;
	ssize_t n;

	pick_range(f, align, MAXIO, &off, &len);
	rec(direct ? OP_DWRITE : OP_WRITE, f, off, len, align == 2);
	fill(S.buf, len, S.op);
	n = pwrite(direct ? S.dfd[f] : S.fd[f], S.buf, len, (off_t)off);
	if (direct && dio_refused(align, n))
		return;
	if (n != (ssize_t)len)
		fsx_fail(f, off, "%s f%d [0x%" PRIx64 ", +0x%" PRIx64 ") returned %zd (%s)",
			 direct ? "O_DIRECT pwrite" : "pwrite", f, off, len, n,
			 n < 0 ? strerror(errno) : "short");
	model_write(f, S.buf, off, len);
}

static void op_read(int f, int direct)
{
	int align = direct ? dio_align() : pick_align();
	uint64_t off, len, want;
	ssize_t n;

	pick_range(f, align, MAXIO, &off, &len);
	rec(direct ? OP_DREAD : OP_READ, f, off, len, align == 2);
	want = off >= S.size[f] ? 0 : S.size[f] - off < len ? S.size[f] - off : len;
	n = pread(direct ? S.dfd[f] : S.fd[f], S.got, len, (off_t)off);
	if (direct && dio_refused(align, n))
		return;
	if (n != (ssize_t)want)
		fsx_fail(f, off, "%s f%d [0x%" PRIx64 ", +0x%" PRIx64 ") returned %zd (%s), "
			 "expected %" PRIu64 " (size 0x%" PRIx64 ")",
			 direct ? "O_DIRECT pread" : "pread", f, off, len, n,
			 n < 0 ? strerror(errno) : "count", want, S.size[f]);
	compare(f, S.got, off, want, direct ? "O_DIRECT pread" : "pread");
	if (!direct && rnd(4) == 0)
		check_size(f, "after a read");
}

static void op_truncate(int f)
{
	uint64_t size = S.size[f], ns;

	switch (rnd(10)) {
	case 0: case 1: case 2: ns = size - rnd((size < (256 << 10) ? size : (256 << 10)) + 1); break;
	case 3: case 4: ns = rnd(size + 1); break;
	case 5: case 6: ns = size + rnd(1 << 20); break;
	case 7: ns = rnd(MAXSZ(f) + 1); break;
	case 8: ns = rnd(2) ? near_level(f) : rnd(MAXSZ(f) / BLK + 1) * BLK; break;
	default: ns = rnd(4) ? size : 0; break;
	}
	if (ns > MAXSZ(f))
		ns = MAXSZ(f);
	rec(OP_TRUNC, f, ns, 0, 0);
	if (ftruncate(S.fd[f], (off_t)ns))
		fsx_fail(f, ns, "ftruncate f%d to 0x%" PRIx64 ": %s", f, ns, strerror(errno));
	model_resize(f, ns);
}

static void op_punch(int f)
{
	uint64_t off, len;
	int align = pick_align();

	pick_range(f, align, 2 << 20, &off, &len);
	rec(OP_PUNCH, f, off, len, align == 2);
	if (fallocate(S.fd[f], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len)) {
		if (errno == EOPNOTSUPP) {
			printf("fsx: fallocate(PUNCH_HOLE|KEEP_SIZE) is not supported: punching "
			       "disabled\n");
			S.disabled[OP_PUNCH] = 1;
			return;
		}
		fsx_fail(f, off, "punch f%d [0x%" PRIx64 ", +0x%" PRIx64 "): %s", f, off, len,
			 strerror(errno));
	}
	if (off < S.size[f])
		memset(S.model[f] + off, 0, (off + len < S.size[f] ? off + len : S.size[f]) - off);
}

static void op_falloc(int f)
{
	uint64_t off, len;

	pick_range(f, pick_align(), MAXIO, &off, &len);
	rec(OP_FALLOC, f, off, len, 0);
	if (fallocate(S.fd[f], 0, (off_t)off, (off_t)len)) {
		if (errno == EOPNOTSUPP) {
			printf("fsx: fallocate mode 0 is not supported: disabled\n");
			S.disabled[OP_FALLOC] = 1;
			return;
		}
		fsx_fail(f, off, "fallocate f%d [0x%" PRIx64 ", +0x%" PRIx64 "): %s", f, off, len,
			 strerror(errno));
	}
	if (off + len > S.size[f])
		S.size[f] = off + len;
}

/* fallocate(KEEP_SIZE): a reservation, no change a reader sees (past EOF included). */
static void op_keep(int f)
{
	uint64_t off, len;

	pick_range(f, pick_align(), MAXIO, &off, &len);
	rec(OP_KEEP, f, off, len, 0);
	if (fallocate(S.fd[f], FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		fsx_fail(f, off, "fallocate(KEEP_SIZE) f%d [0x%" PRIx64 ", +0x%" PRIx64 "): %s", f,
			 off, len, strerror(errno));
}

/* fallocate(ZERO_RANGE), with KEEP_SIZE half the time. */
static void op_zero(int f)
{
	uint64_t off, len, end;
	int keep = (int)rnd(2);

	pick_range(f, pick_align(), 2 << 20, &off, &len);
	rec(OP_ZERO, f, off, len, keep);
	if (fallocate(S.fd[f], FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0), (off_t)off,
		      (off_t)len))
		fsx_fail(f, off, "fallocate(ZERO_RANGE%s) f%d [0x%" PRIx64 ", +0x%" PRIx64 "): %s",
			 keep ? "|KEEP_SIZE" : "", f, off, len, strerror(errno));
	end = off + len;
	if (off < S.size[f])
		memset(S.model[f] + off, 0, (end < S.size[f] ? end : S.size[f]) - off);
	if (!keep && end > S.size[f])
		S.size[f] = end;
}

/* COLLAPSE_RANGE or INSERT_RANGE, block-aligned, through zlfs's ioctl (the kernel's FUSE
 * module passes neither); the file is synced first, as the ioctl asks. Refused on encrypted
 * files and writeback_cache mounts. */
static void op_shift(int f, int insert)
{
	uint64_t size = S.size[f], off, len, blocks = size / BLK;
	struct zlfs_ioc_range r;

	if (insert ? !blocks || size + BLK > MAXSZ(f) : blocks < 2)
		return;
	off = rnd(insert ? (size + BLK - 1) / BLK : blocks - 1) * BLK;
	len = (1 + rnd(insert ? (MAXSZ(f) - size) / BLK : (size - off - 1) / BLK)) * BLK;
	if (len > (2u << 20))
		len = (1 + rnd(512)) * BLK;
	if (!insert && off + len >= size)
		return;
	if (insert && size + len > MAXSZ(f))
		return;
	rec(insert ? OP_INSERT : OP_COLLAPSE, f, off, len, 0);
	r.off = off;
	r.len = len;
	if (fsync(S.fd[f]) ||
	    ioctl(S.fd[f], insert ? ZLFS_IOC_INSERT_RANGE : ZLFS_IOC_COLLAPSE_RANGE, &r)) {
		if (errno == EOPNOTSUPP && (S.encrypted || strstr(S.opts, "writeback_cache")))
			return;
		fsx_fail(f, off, "%s f%d [0x%" PRIx64 ", +0x%" PRIx64 "): %s",
			 insert ? "insert" : "collapse", f, off, len, strerror(errno));
	}
	if (insert) {
		memmove(S.model[f] + off + len, S.model[f] + off, size - off);
		memset(S.model[f] + off, 0, len);
		S.size[f] = size + len;
	} else {
		memmove(S.model[f] + off, S.model[f] + off + len, size - off - len);
		memset(S.model[f] + size - len, 0, len);
		S.size[f] = size - len;
	}
	check_size(f, insert ? "after an insert" : "after a collapse"); /* refreshes the kernel's size */
}

/* Through a shared mapping of the file: a read, or a write followed by msync, inside EOF.
 * Not on a direct_io mount, where FUSE refuses shared mappings. */
static void op_map(int f, int write)
{
	uint64_t off, len, moff;
	uint8_t *m;
	long pg = sysconf(_SC_PAGESIZE);

	if (!S.size[f]) {
		(write ? op_write : op_read)(f, 0);
		return;
	}
	off = rnd(S.size[f]);
	len = 1 + rnd(S.size[f] - off < (256 << 10) ? S.size[f] - off : (256 << 10));
	rec(write ? OP_MWRITE : OP_MREAD, f, off, len, 0);
	moff = off - off % (uint64_t)pg;
	m = mmap(NULL, len + (off - moff), write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
		 S.fd[f], (off_t)moff);
	if (m == MAP_FAILED)
		fsx_fail(f, off, "mmap f%d [0x%" PRIx64 ", +0x%" PRIx64 "): %s", f, moff,
			 len + (off - moff), strerror(errno));
	if (write) {
		fill(S.buf, len, S.op);
		memcpy(m + (off - moff), S.buf, len);
		if (msync(m, len + (off - moff), MS_SYNC))
			fsx_fail(f, off, "msync f%d: %s", f, strerror(errno));
		model_write(f, S.buf, off, len);
	} else {
		memcpy(S.got, m + (off - moff), len);
	}
	munmap(m, len + (off - moff));
	if (!write)
		compare(f, S.got, off, len, "read through mmap");
}

static void op_fsync(int f)
{
	int data = (int)rnd(2);

	rec(OP_FSYNC, f, 0, 0, data);
	if (data ? fdatasync(S.fd[f]) : fsync(S.fd[f]))
		fsx_fail(f, 0, "%s f%d: %s", data ? "fdatasync" : "fsync", f, strerror(errno));
}

static void op_reopen(int f)
{
	int trunc = rnd(6) == 0;

	rec(OP_REOPEN, f, 0, 0, trunc);
	if (close(S.fd[f]))
		fsx_fail(f, 0, "close f%d: %s", f, strerror(errno));
	if (S.dfd[f] >= 0)
		close(S.dfd[f]);
	S.fd[f] = open(S.path[f], O_RDWR | (trunc ? O_TRUNC : 0));
	if (S.fd[f] < 0)
		fsx_fail(f, 0, "reopen f%d: %s", f, strerror(errno));
	if (trunc)
		model_resize(f, 0);
	if (S.dfd[f] >= 0) {
		S.dfd[f] = open(S.path[f], O_RDWR | O_DIRECT);
		if (S.dfd[f] < 0)
			fsx_fail(f, 0, "reopen f%d O_DIRECT: %s", f, strerror(errno));
	}
}

static void op_checkpoint(void)
{
	int fd = open(S.mnt, O_RDONLY | O_DIRECTORY);

	rec(OP_CKPT, -1, 0, 0, 0);
	if (fd < 0 || ioctl(fd, ZLFS_IOC_SYNC))
		fsx_fail(-1, 0, "checkpoint ioctl: %s", strerror(errno));
	close(fd);
}

static enum op_kind pick_op(void)
{
	unsigned total = 0, r;
	int k, map_ok = !strstr(mount_choice[S.mount_choice], "direct_io");

	for (k = 0; k < OP_NKINDS; k++)
		if (!S.disabled[k] && (map_ok || (k != OP_MREAD && k != OP_MWRITE)))
			total += op_weight[k];
	r = (unsigned)rnd(total);
	for (k = 0; k < OP_NKINDS; k++) {
		if (S.disabled[k] || (!map_ok && (k == OP_MREAD || k == OP_MWRITE)))
			continue;
		if (r < op_weight[k])
			break;
		r -= op_weight[k];
	}
	return (enum op_kind)k;
}

void do_op(void)
{
	enum op_kind k = pick_op();
	int f = (int)rnd(NFILES);

	switch (k) {
	case OP_WRITE: op_write(f, 0); break;
	case OP_READ: op_read(f, 0); break;
	case OP_TRUNC: op_truncate(f); break;
	case OP_PUNCH: op_punch(f); break;
	case OP_FALLOC: op_falloc(f); break;
	case OP_FSYNC: op_fsync(f); break;
	case OP_DWRITE: op_write(f, 1); break;
	case OP_DREAD: op_read(f, 1); break;
	case OP_MREAD: op_map(f, 0); break;
	case OP_MWRITE: op_map(f, 1); break;
	case OP_REOPEN: op_reopen(f); break;
	case OP_CKPT: op_checkpoint(); break;
	case OP_KEEP: op_keep(f); break;
	case OP_ZERO: op_zero(f); break;
	case OP_COLLAPSE: op_shift(f, 0); break;
	case OP_INSERT: op_shift(f, 1); break;
	default: break;
	}
}
