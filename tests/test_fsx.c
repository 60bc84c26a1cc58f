/*
 * test_fsx.c - an fsx-style randomized file-operation test through the real daemon.
 *
 * A seeded PRNG drives a long run of operations on three files (up to 8, 8 and 16 MiB), each
 * mirrored in an in-memory model of the file (holes and everything past EOF are zeros in the
 * model). The 80 MiB emulated image in 2 MiB zones never fills, but is small enough that
 * garbage collection, foreground and background, has to move data. The operations:
 *   pwrite at random offsets and lengths (1 byte to 1 MiB, aligned and not, past EOF leaving
 *   holes), pread compared byte for byte with the model, ftruncate down and up,
 *   fallocate(PUNCH_HOLE|KEEP_SIZE), fallocate mode 0 (extends the size with zeros),
 *   KEEP_SIZE (a reservation: nothing a reader sees changes), ZERO_RANGE (with and without
 *   KEEP_SIZE), COLLAPSE_RANGE and INSERT_RANGE (block-aligned, through zlfs's ioctl: the
 *   kernel's FUSE module passes neither; refused on encrypted files), fsync and
 *   fdatasync, O_DIRECT reads and writes, reads and writes through a shared mapping (msync;
 *   not on direct_io mounts, where FUSE refuses shared mappings),
 *   close and reopen (sometimes with O_TRUNC), a checkpoint through the control ioctl, and
 *   every ~500 operations an unmount (the daemon must exit 0), fsck -n (must be clean) and a
 *   remount with other mount options (direct_io, writeback_cache, the static write buffer, a
 *   1 s checkpoint timer, eager GC), after which every file is compared in full with the
 *   model. At the end: a full comparison, unmount and a clean fsck.
 * Two cases: a plain filesystem, and an encrypted one (mkfs --encrypt, -o encrypt_all).
 *
 * A mismatch names the seed, the operation number, the file, the first differing offset with
 * the expected and found bytes, the operations that last touched that offset and the tail of
 * the operation log.
 *
 * Environment: ZLFS_FSX_OPS (operations per case, default 5000), ZLFS_FSX_SEED (a number, or
 * "random"; default a fixed seed per case), ZLFS_FSX_VERBOSE=1 (print every operation),
 * CK_RUN_CASE=plain|encrypted (one case).
 */
#include "testutil.h"

#include "zdev_emu.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define NFILES 3
/* The largest size each file reaches. An inode addresses 977 blocks itself and 2024 more
 * through its two direct nodes: the third file goes past those 11.7 MiB into the indirect
 * level. */
static const uint64_t max_size[NFILES] = {8 << 20, 8 << 20, 16 << 20};
#define MAXSZ(f) max_size[f]
#define MAXIO (1u << 20) /* largest single read or write */
#define BLK 4096u
#define DEFAULT_OPS 5000

enum op_kind {
	OP_WRITE, OP_READ, OP_TRUNC, OP_PUNCH, OP_FALLOC, OP_FSYNC, OP_DWRITE, OP_DREAD, OP_MREAD,
	OP_MWRITE, OP_REOPEN, OP_CKPT, OP_KEEP, OP_ZERO, OP_COLLAPSE, OP_INSERT, OP_REMOUNT,
	OP_NKINDS
};

static const char *const op_name[OP_NKINDS] = {
	"write", "read", "truncate", "punch", "falloc", "fsync", "dio-write", "dio-read",
	"map-read", "map-write", "reopen", "checkpoint", "keep-size", "zero-range", "collapse",
	"insert", "remount"};

/* Weights of the operations the loop picks from (remounts come on their own schedule). */
static const unsigned op_weight[OP_NKINDS] = {
	[OP_WRITE] = 26, [OP_READ] = 20, [OP_TRUNC] = 6, [OP_PUNCH] = 7, [OP_FALLOC] = 5,
	[OP_FSYNC] = 4, [OP_DWRITE] = 7, [OP_DREAD] = 7, [OP_MREAD] = 5, [OP_MWRITE] = 5,
	[OP_REOPEN] = 2, [OP_CKPT] = 1, [OP_KEEP] = 3, [OP_ZERO] = 4, [OP_COLLAPSE] = 3,
	[OP_INSERT] = 3};

/* Mount options, in the order remounts go through them (each one skips ahead one or two, the
 * first is random); an encrypted case adds its key and encrypt_all. */
static const char *const mount_choice[] = {
	"", "cp_interval=1", "direct_io", "writeback_cache", "wb_policy=static",
	"direct_io,cp_interval=1", "gc_high=95,gc_low=90,cp_interval=1"};
#define NMOUNT_CHOICES (sizeof(mount_choice) / sizeof(mount_choice[0]))

struct oprec {
	long n;          /* operation number */
	uint8_t kind;    /* enum op_kind */
	uint8_t file;
	uint8_t flag;    /* read, write: 1 block-aligned; fsync: 1 fdatasync; reopen: 1 O_TRUNC; remount:
			  * the mount option choice */
	uint64_t off, len;
	uint64_t size;   /* the model's size before the operation */
};

static struct {
	const char *cname;
	int encrypted, verbose, dio_aligned_only;
	uint64_t seed, rng;
	long nops, op; /* operations asked for, the current one */
	char img[512], mnt[512], key[512], bin[512], dir[600], path[NFILES][700], opts[1200];
	pid_t pid;
	int mount_choice;
	int fd[NFILES], dfd[NFILES];
	uint8_t *model[NFILES];
	uint64_t size[NFILES];
	uint8_t *buf, *got; /* MAXIO + BLK bytes each, BLK-aligned */
	int disabled[OP_NKINDS];
	struct oprec *log;
	long nlog, cap;
	long count[OP_NKINDS];
	uint64_t bytes_written, size_sum;
	long gc_zones, gc_bytes; /* from zlfs-ctl stats: summed over mounts; lifetime */
} S;

/* ---- PRNG ------------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
static uint64_t rnd(uint64_t n)
{
	return n ? (uint64_t)(((unsigned __int128)splitmix(&S.rng) * n) >> 64) : 0;
}

/* The data written by operation N: its own stream, so the bytes do not depend on the order
 * of PRNG calls. */
static void fill(uint8_t *b, size_t len, long n)
{
	uint64_t x = S.seed ^ ((uint64_t)n * 0xd1342543de82ef95ULL), v = 0;

	for (size_t i = 0; i < len; i++) {
		if (!(i & 7))
			v = splitmix(&x);
		b[i] = (uint8_t)(v >> (8 * (i & 7)));
	}
}

/* ---- the log and failure reports ---------------------------------------------------------- */

static void rec_print(const struct oprec *r)
{
	printf("  #%-6ld %-10s", r->n, op_name[r->kind]);
	switch (r->kind) {
	case OP_WRITE: case OP_READ: case OP_PUNCH: case OP_FALLOC: case OP_DWRITE:
	case OP_DREAD: case OP_MREAD: case OP_MWRITE: case OP_KEEP: case OP_ZERO:
	case OP_COLLAPSE: case OP_INSERT:
		printf(" f%u [0x%" PRIx64 ", 0x%" PRIx64 ") len 0x%" PRIx64, r->file, r->off,
		       r->off + r->len, r->len);
		break;
	case OP_TRUNC:
		printf(" f%u to 0x%" PRIx64, r->file, r->off);
		break;
	case OP_FSYNC:
		printf(" f%u%s", r->file, r->flag ? " (fdatasync)" : "");
		break;
	case OP_REOPEN:
		printf(" f%u%s", r->file, r->flag ? " with O_TRUNC" : "");
		break;
	case OP_REMOUNT:
		printf(" -o '%s'", mount_choice[r->flag]);
		break;
	}
	if (r->kind != OP_CKPT && r->kind != OP_REMOUNT)
		printf("  (size was 0x%" PRIx64 ")", r->size);
	printf("\n");
}

static struct oprec *rec(enum op_kind k, int file, uint64_t off, uint64_t len, int flag)
{
	struct oprec *r;

	if (S.nlog == S.cap) {
		S.cap = S.cap ? 2 * S.cap : 4096;
		S.log = realloc(S.log, (size_t)S.cap * sizeof(*S.log));
		ck_assert_ptr_nonnull(S.log);
	}
	r = &S.log[S.nlog++];
	*r = (struct oprec){.n = S.op, .kind = (uint8_t)k, .file = (uint8_t)file,
			    .flag = (uint8_t)flag, .off = off, .len = len,
			    .size = file >= 0 ? S.size[file] : 0};
	S.count[k]++;
	if (S.verbose)
		rec_print(r);
	return r;
}

/* Whether R changed byte OFF of FILE (wrote it, zeroed it, or cut it off). */
static int rec_touches(const struct oprec *r, int file, uint64_t off)
{
	if (r->kind == OP_REMOUNT || r->kind == OP_CKPT || r->file != file)
		return 0;
	switch (r->kind) {
	case OP_WRITE: case OP_DWRITE: case OP_MWRITE: case OP_PUNCH: case OP_ZERO:
		return off >= r->off && off < r->off + r->len;
	case OP_COLLAPSE: case OP_INSERT:
		return off >= r->off;
	case OP_TRUNC:
		return off >= r->off;
	case OP_FALLOC:
		return off >= r->size && off < r->off + r->len;
	case OP_REOPEN:
		return r->flag;
	}
	return 0;
}

static void kill_daemon(void)
{
	int st;

	if (S.pid > 0 && waitpid(S.pid, &st, WNOHANG) == S.pid) {
		printf("the daemon had exited: %s %d\n", WIFSIGNALED(st) ? "signal" : "status",
		       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		tu_sh("fusermount3 -uz %s 2>/dev/null", S.mnt);
		S.pid = -1;
	}
	if (S.pid > 0) {
		tu_sh("fusermount3 -uz %s 2>/dev/null", S.mnt);
		kill(S.pid, SIGKILL);
		S.pid = -1;
	}
}

static void print_tail(int file, uint64_t off)
{
	long i, shown = 0;

	if (file >= 0) {
		printf("last operations that changed f%d at 0x%" PRIx64 ":\n", file, off);
		for (i = S.nlog - 1; i >= 0 && shown < 8; i--)
			if (rec_touches(&S.log[i], file, off)) {
				rec_print(&S.log[i]);
				shown++;
			}
		if (!shown)
			printf("  (none: it was never written)\n");
	}
	printf("last %ld operations:\n", S.nlog < 40 ? S.nlog : 40L);
	for (i = S.nlog > 40 ? S.nlog - 40 : 0; i < S.nlog; i++)
		rec_print(&S.log[i]);
}

static void fsx_fail(int file, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fsx_fail(int file, uint64_t off, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("\nFSX FAILURE: case %s, seed %" PRIu64 ", operation %ld, mount -o '%s': %s\n",
	       S.cname, S.seed, S.op, S.opts, msg);
	kill_daemon();
	print_tail(file, off);
	printf("reproduce: ZLFS_FSX_SEED=%" PRIu64 " ZLFS_FSX_OPS=%ld CK_RUN_CASE=%s ctest -R "
	       "test_fsx --output-on-failure (ZLFS_FSX_VERBOSE=1 prints every operation)\n",
	       S.seed, S.nops, S.cname);
	fflush(stdout);
	ck_abort_msg("fsx %s seed %" PRIu64 " op %ld: %s", S.cname, S.seed, S.op, msg);
}

/* Compare GOT (LEN bytes of FILE at OFF) with the model. */
static void compare(int f, const uint8_t *got, uint64_t off, uint64_t len, const char *how)
{
	const uint8_t *want = S.model[f] + off;
	uint64_t i, j, last, ndiff = 0, end;
	char exp_s[64] = "", got_s[64] = "";

	if (!memcmp(got, want, len))
		return;
	for (i = 0; got[i] == want[i]; i++)
		;
	for (j = last = i; j < len; j++)
		if (got[j] != want[j]) {
			ndiff++;
			last = j;
		}
	end = i + 8 < len ? i + 8 : len;
	for (uint64_t k = i; k < end; k++) {
		snprintf(exp_s + strlen(exp_s), sizeof(exp_s) - strlen(exp_s), "%02x", want[k]);
		snprintf(got_s + strlen(got_s), sizeof(got_s) - strlen(got_s), "%02x", got[k]);
	}
	fsx_fail(f, off + i,
		 "%s of f%d [0x%" PRIx64 ", +0x%" PRIx64 "): first difference at offset 0x%" PRIx64
		 " (size 0x%" PRIx64 "), %" PRIu64 " bytes differ up to 0x%" PRIx64 "; expected %s,"
		 " got %s%s", how, f, off, len, off + i, S.size[f], ndiff, off + last, exp_s, got_s,
		 !got[i] && !memcmp(got + i, (uint8_t[8]){0}, end - i) ? " (zeros)" : "");
}

/* ---- files ---------------------------------------------------------------------------------- */

static void open_files(int trunc_all)
{
	for (int f = 0; f < NFILES; f++) {
		S.fd[f] = open(S.path[f], O_RDWR | O_CREAT | (trunc_all ? O_TRUNC : 0), 0644);
		if (S.fd[f] < 0)
			fsx_fail(f, 0, "open %s: %s", S.path[f], strerror(errno));
		S.dfd[f] = -1;
		if (S.disabled[OP_DWRITE])
			continue;
		S.dfd[f] = open(S.path[f], O_RDWR | O_DIRECT);
		if (S.dfd[f] < 0 && errno == EINVAL) {
			printf("fsx: O_DIRECT open refused (EINVAL): O_DIRECT reads and writes disabled\n");
			S.disabled[OP_DWRITE] = S.disabled[OP_DREAD] = 1;
		} else if (S.dfd[f] < 0) {
			fsx_fail(f, 0, "open %s O_DIRECT: %s", S.path[f], strerror(errno));
		}
	}
}

static void close_files(void)
{
	for (int f = 0; f < NFILES; f++) {
		if (S.fd[f] >= 0 && close(S.fd[f]))
			fsx_fail(f, 0, "close: %s", strerror(errno));
		if (S.dfd[f] >= 0 && close(S.dfd[f]))
			fsx_fail(f, 0, "close (O_DIRECT): %s", strerror(errno));
		S.fd[f] = S.dfd[f] = -1;
	}
}

static void check_size(int f, const char *when)
{
	struct stat st;

	if (fstat(S.fd[f], &st))
		fsx_fail(f, 0, "fstat: %s", strerror(errno));
	if ((uint64_t)st.st_size != S.size[f])
		fsx_fail(f, 0, "%s: f%d has size 0x%" PRIx64 ", the model 0x%" PRIx64, when, f,
			 (uint64_t)st.st_size, S.size[f]);
}

/* Every file read in full and compared with the model; nothing past EOF. */
static void verify_all(const char *when)
{
	for (int f = 0; f < NFILES; f++) {
		uint64_t off = 0;
		ssize_t n;

		check_size(f, when);
		while (off < S.size[f]) {
			uint64_t len = S.size[f] - off < MAXIO ? S.size[f] - off : MAXIO;

			n = pread(S.fd[f], S.got, len, (off_t)off);
			if (n != (ssize_t)len)
				fsx_fail(f, off, "%s: pread f%d [0x%" PRIx64 ", +0x%" PRIx64
					 ") returned %zd (%s)", when, f, off, len, n,
					 n < 0 ? strerror(errno) : "short");
			compare(f, S.got, off, len, when);
			off += len;
		}
		n = pread(S.fd[f], S.got, BLK, (off_t)S.size[f]);
		if (n != 0)
			fsx_fail(f, S.size[f], "%s: pread at EOF 0x%" PRIx64 " of f%d returned %zd",
				 when, S.size[f], f, n);
	}
}

/* ---- mounting ------------------------------------------------------------------------------- */

static void mount_fs(int choice)
{
	S.mount_choice = choice;
	if (S.encrypted)
		snprintf(S.opts, sizeof(S.opts), "keyfile=%s,encrypt_all%s%s", S.key,
			 *mount_choice[choice] ? "," : "", mount_choice[choice]);
	else
		snprintf(S.opts, sizeof(S.opts), "%s", mount_choice[choice]);
	S.pid = tu_daemon_start(S.img, S.mnt, *S.opts ? S.opts : NULL);
	if (S.pid <= 0)
		fsx_fail(-1, 0, "the daemon did not mount %s with -o '%s'", S.img, S.opts);
	if (strstr(mount_choice[choice], "gc_low"))
		usleep(1200000); /* background GC first looks after 1 s: let it run beside the ops */
}

static void fsck_clean(const char *when)
{
	int rc = tu_sh("%s -n %s >/dev/null", tu_bin(S.bin, sizeof(S.bin), "fsck.zlfs"), S.img);

	if (rc) {
		tu_sh("%s -n -v %s", S.bin, S.img);
		fsx_fail(-1, 0, "%s: fsck.zlfs -n exited %d", when, rc);
	}
}

static void unmount_fs(const char *when)
{
	long gz, gb;
	int rc;

	close_files();
	gz = tu_ctl_stat(S.mnt, "zones_reclaimed");
	gb = tu_ctl_stat(S.mnt, "bytes_migrated");
	if (S.verbose)
		printf("  (this mount: GC reclaimed %ld zones, moved %ld bytes)\n", gz, gb);
	S.gc_zones += gz > 0 ? gz : 0;
	S.gc_bytes = gb > 0 ? gb : S.gc_bytes; /* kept across mounts */
	rc = tu_daemon_stop(S.mnt, S.pid);
	S.pid = -1;
	if (rc)
		fsx_fail(-1, 0, "%s: the daemon exited %d at unmount", when, rc);
	fsck_clean(when);
}

static void do_remount(void)
{
	int choice = (S.mount_choice + 1 + (int)rnd(2)) % (int)NMOUNT_CHOICES;

	rec(OP_REMOUNT, -1, 0, 0, choice);
	unmount_fs("remount");
	mount_fs(choice);
	open_files(0);
	verify_all("after remount");
}

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

static void do_op(void)
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

/* ---- the run -------------------------------------------------------------------------------- */

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : dflt;
}

static void fresh_image(void)
{
	struct zemu_create_opts o = {.size = 80 << 20, .zone_size = 2 << 20, .max_open = 12,
				     .max_active = 12};

	tu_path(S.img, sizeof(S.img), S.encrypted ? "fsx-enc.img" : "fsx.img");
	tu_path(S.mnt, sizeof(S.mnt), "mnt");
	tu_sh("fusermount3 -uz %s 2>/dev/null", S.mnt);
	mkdir(S.mnt, 0755);
	unlink(S.img);
	ck_assert_int_eq(zemu_create(S.img, &o), 0);
	if (!S.encrypted) {
		ck_assert_int_eq(tu_sh("%s -q %s", tu_bin(S.bin, sizeof(S.bin), "mkfs.zlfs"), S.img),
				 0);
		return;
	}
	tu_path(S.key, sizeof(S.key), "fsx.key");
	unlink(S.key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(S.bin, sizeof(S.bin), "zlfs-ctl"), S.key),
			 0);
	ck_assert_int_eq(tu_sh("%s -q --encrypt --keyfile %s %s",
			       tu_bin(S.bin, sizeof(S.bin), "mkfs.zlfs"), S.key, S.img), 0);
}

static void check_encryption(void)
{
	for (int f = 0; f < NFILES; f++) {
		struct zlfs_ioc_encrypt e = {0};

		ck_assert_int_eq(ioctl(S.fd[f], ZLFS_IOC_GET_ENCRYPT, &e), 0);
		ck_assert_msg(!!(e.flags & ZLFS_ENC_ENCRYPTED) == S.encrypted,
			      "f%d: encryption flags 0x%x in the %s case", f, e.flags, S.cname);
	}
}

static void run_fsx(const char *cname, int encrypted, uint64_t default_seed)
{
	const char *seed_env = getenv("ZLFS_FSX_SEED");
	long next_remount;
	struct timeval t0, t1;

	memset(&S, 0, sizeof(S));
	S.cname = cname;
	S.encrypted = encrypted;
	S.pid = -1;
	S.verbose = (int)env_long("ZLFS_FSX_VERBOSE", 0);
	S.nops = env_long("ZLFS_FSX_OPS", DEFAULT_OPS);
	if (seed_env && !strcmp(seed_env, "random")) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		S.seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
		S.seed %= 1000000000u;
	} else {
		S.seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) : default_seed;
	}
	S.rng = S.seed;
	for (int f = 0; f < NFILES; f++) {
		S.fd[f] = S.dfd[f] = -1;
		S.model[f] = calloc(MAXSZ(f), 1);
		ck_assert_ptr_nonnull(S.model[f]);
	}
	ck_assert_int_eq(posix_memalign((void **)&S.buf, BLK, MAXIO + BLK), 0);
	ck_assert_int_eq(posix_memalign((void **)&S.got, BLK, MAXIO + BLK), 0);
	printf("fsx %s: seed %" PRIu64 ", %ld operations on %d files of up to 8, 8 and 16 MiB "
	       "(ZLFS_FSX_SEED / ZLFS_FSX_OPS to change)\n", cname, S.seed, S.nops, NFILES);
	fflush(stdout);
	gettimeofday(&t0, NULL);

	fresh_image();
	mount_fs((int)rnd(NMOUNT_CHOICES));
	snprintf(S.dir, sizeof(S.dir), "%s/fsx", S.mnt);
	ck_assert_int_eq(mkdir(S.dir, 0755), 0);
	for (int f = 0; f < NFILES; f++)
		snprintf(S.path[f], sizeof(S.path[f]), "%s/file%d", S.dir, f);
	open_files(1);
	check_encryption();

	next_remount = 350 + (long)rnd(300);
	for (S.op = 1; S.op <= S.nops; S.op++) {
		if (S.op == next_remount) {
			do_remount();
			next_remount = S.op + 350 + (long)rnd(300);
			continue;
		}
		do_op();
		for (int f = 0; f < NFILES; f++)
			S.size_sum += S.size[f];
	}
	S.op = S.nops + 1;
	verify_all("at the end");
	rec(OP_REMOUNT, -1, 0, 0, 0);
	unmount_fs("final unmount");
	mount_fs(0); /* once more: everything the final unmount wrote reads back */
	open_files(0);
	verify_all("after the final remount");
	unmount_fs("final unmount");

	gettimeofday(&t1, NULL);
	printf("fsx %s: seed %" PRIu64 " passed in %.1f s, %.1f MiB written; operations:", cname,
	       S.seed, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_usec - t0.tv_usec) / 1e6,
	       (double)S.bytes_written / (1 << 20));
	for (int k = 0; k < OP_NKINDS; k++)
		printf(" %s %ld%s", op_name[k], S.count[k], S.disabled[k] ? " (disabled)" : "");
	printf("; mean file size %.1f MiB; GC reclaimed %ld zones, moved %.1f MiB\n",
	       (double)S.size_sum / (double)S.nops / NFILES / (1 << 20), S.gc_zones,
	       (double)S.gc_bytes / (1 << 20));
	fflush(stdout);
	for (int f = 0; f < NFILES; f++)
		free(S.model[f]);
	free(S.buf);
	free(S.got);
	free(S.log);
}

START_TEST(t_fsx_plain)
{
	run_fsx("plain", 0, 20240601);
}
END_TEST

START_TEST(t_fsx_encrypted)
{
	run_fsx("encrypted", 1, 20240602);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	int timeout = getenv("ZLFS_FSX_OPS") ? 0 : 600; /* long runs: no limit */

	if (tu_fuse_missing())
		return 77;
	s = suite_create("fsx");
	tc = tcase_create("plain");
	tcase_set_timeout(tc, timeout);
	tcase_add_test(tc, t_fsx_plain);
	suite_add_tcase(s, tc);
	tc = tcase_create("encrypted");
	tcase_set_timeout(tc, timeout);
	tcase_add_test(tc, t_fsx_encrypted);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
