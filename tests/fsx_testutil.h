/*
 * fsx_testutil.h - what the files of test_fsx share: the files and the operations (their
 * kinds, names and log records), the state of a run and its in-memory model of every file,
 * the PRNG and the data each operation writes, failure reports, comparing with the model,
 * opening the files and mounting the daemon.
 *
 * The operations are in test_fsx_ops.c; test_fsx.c runs them.
 */
#ifndef ZLFS_FSX_TESTUTIL_H
#define ZLFS_FSX_TESTUTIL_H

#include "testutil.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NFILES 3
/* The largest size each file reaches (fsx_testutil.c says why). */
extern const uint64_t max_size[NFILES];
#define MAXSZ(f) max_size[f]
#define MAXIO (1u << 20) /* largest single read or write */
#define BLK 4096u
#define DEFAULT_OPS 5000

enum op_kind {
	OP_WRITE, OP_READ, OP_TRUNC, OP_PUNCH, OP_FALLOC, OP_FSYNC, OP_DWRITE, OP_DREAD, OP_MREAD,
	OP_MWRITE, OP_REOPEN, OP_CKPT, OP_KEEP, OP_ZERO, OP_COLLAPSE, OP_INSERT, OP_REMOUNT,
	OP_NKINDS
};

extern const char *const op_name[OP_NKINDS];

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

struct fsx_state {
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
};
extern struct fsx_state S;

/* ---- the PRNG, failure reports, the files, mounting (fsx_testutil.c) ----------------- */

uint64_t rnd(uint64_t n);
void fill(uint8_t *b, size_t len, long n);
struct oprec *rec(enum op_kind k, int file, uint64_t off, uint64_t len, int flag);
void fsx_fail(int file, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void compare(int f, const uint8_t *got, uint64_t off, uint64_t len, const char *how);
void open_files(int trunc_all);
void check_size(int f, const char *when);
void verify_all(const char *when);
void mount_fs(int choice);
void unmount_fs(const char *when);
void do_remount(void);

/* ---- the operations (test_fsx_ops.c) ---------------------------------------------------- */

/* One operation, picked by weight, on a random file. */
void do_op(void);

#endif
