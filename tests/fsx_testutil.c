/*
 * fsx_testutil.c - see fsx_testutil.h: the PRNG and each operation's data, the operation log
 * and failure reports, comparing with the model, the files, mounting and fsck.
 */
#include "fsx_testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The largest size each file reaches. An inode addresses 977 blocks itself and 2024 more
 * through its two direct nodes: the third file goes past those 11.7 MiB into the indirect
 * level. */
const uint64_t max_size[NFILES] = {8 << 20, 8 << 20, 16 << 20};

const char *const op_name[OP_NKINDS] = {
	"write", "read", "truncate", "punch", "falloc", "fsync", "dio-write", "dio-read",
	"map-read", "map-write", "reopen", "checkpoint", "keep-size", "zero-range", "collapse",
	"insert", "remount"};

struct fsx_state S;

/* ---- PRNG ------------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
uint64_t rnd(uint64_t n)
{
	return n ? (uint64_t)(((unsigned __int128)splitmix(&S.rng) * n) >> 64) : 0;
}

/* The data written by operation N: its own stream, so the bytes do not depend on the order
 * of PRNG calls. */
void fill(uint8_t *b, size_t len, long n)
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

struct oprec *rec(enum op_kind k, int file, uint64_t off, uint64_t len, int flag)
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

void fsx_fail(int file, uint64_t off, const char *fmt, ...)
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
void compare(int f, const uint8_t *got, uint64_t off, uint64_t len, const char *how)
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

void open_files(int trunc_all)
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

void check_size(int f, const char *when)
{
	struct stat st;

	if (fstat(S.fd[f], &st))
		fsx_fail(f, 0, "fstat: %s", strerror(errno));
	if ((uint64_t)st.st_size != S.size[f])
		fsx_fail(f, 0, "%s: f%d has size 0x%" PRIx64 ", the model 0x%" PRIx64, when, f,
			 (uint64_t)st.st_size, S.size[f]);
}

/* Every file read in full and compared with the model; nothing past EOF. */
void verify_all(const char *when)
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

void mount_fs(int choice)
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

void unmount_fs(const char *when)
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

void do_remount(void)
{
	int choice = (S.mount_choice + 1 + (int)rnd(2)) % (int)NMOUNT_CHOICES;

	rec(OP_REMOUNT, -1, 0, 0, choice);
	unmount_fs("remount");
	mount_fs(choice);
	open_files(0);
	verify_all("after remount");
}
