/*
 * crash_testutil.h - what the files of test_crash share: the model of the tree (every file's
 * content as extents of a pattern), the stages its fsyncs made durable and every state a path
 * passed through, the workload's operations on the mount (each one followed by the model),
 * and the daemon with the workload's mount options.
 *
 * The workloads are in test_crash_workloads.c, the check of one crash point in
 * test_crash_check.c; test_crash.c records each workload and tries its crash points.
 */
#ifndef ZLFS_CRASH_TESTUTIL_H
#define ZLFS_CRASH_TESTUTIL_H

#include "testutil.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MAX_FILES 400
#define MAX_STAGES 96
#define MAX_EXT 12
#define MAX_HIST 2048
#define MAX_FOCUS 8

/* A file's content: byte i is pat(seed, base + i - off) of the last extent covering i, else 0
 * (a hole): BASE is where in its pattern an extent starts (its offset, until a collapse or an
 * insert moves it). IS_DIR marks a directory (no content). */
struct ext {
	uint32_t off, len, seed, base;
};

struct file_exp {
	char path[64];
	int is_dir;
	size_t size;
	int nex;
	struct ext e[MAX_EXT];
	int may_be_absent; /* written but never made durable: absent, or a prefix of it */
	int hist_from; /* in a stage: the states (hist) recorded before it was taken; any of the
			* path's later ones may have replaced it (a checkpoint) */
	uint32_t xops;  /* its xattrs: the first XOPS of the script's operations on its path */
};

#define MAX_GONE 16

/* A name a directory fsync made durably absent: after a crash it is not there, or is in a
 * state recorded since (hist from HIST_FROM on: made again, and a checkpoint caught it). */
struct gone {
	char path[64];
	int hist_from;
};

struct stage {
	long ops; /* logged operations when the fsync returned */
	int nhist; /* states recorded (hist) by then */
	int nfiles;
	int ngone;
	struct gone gone[MAX_GONE];
	struct file_exp f[MAX_FILES];
};

/* ---- the model ------------------------------------------------------------------------------ */

/* What the fsyncs promised, stage by stage; the tree as the workload has it now (cur) and
 * every state any path had (hist). */
extern struct stage stages[MAX_STAGES], cur;
extern int nstages, nhist, nfocus;
extern struct file_exp hist[MAX_HIST];
/* The image the workload runs on, its write log, the mount point, the rebuilt device, a
 * binary's path. */
extern char img[512], logpath[512], mnt[512], out[512], bin[512];

/* N bytes of SEED's pattern from file byte BASE on: a function of the offset, which compresses
 * (about 4:1), or for seeds from PAT_RANDOM on does not. */
#define PAT_RANDOM 0x10000u
void fill(uint8_t *b, size_t n, uint32_t seed, size_t base);
struct file_exp fe(const char *path, uint32_t seed, size_t size, int may_be_absent);
void cur_write(const char *path, uint32_t seed, size_t at, size_t len);
#define PAGE_CUT 4096u /* the page size the kernel cuts buffered writes at */
void cur_write_parts(const char *path, uint32_t seed, size_t at, size_t len);
void cur_zero(const char *path, size_t off, size_t len, int keep);
void cur_shift(const char *path, size_t off, size_t len, int insert);

/* ---- the daemon and the workload's operations on the mount ------------------------------ */

extern char mount_opts[700];
extern int want_encrypted_root;

pid_t daemon_start(const char *image);
int daemon_stop(pid_t pid);
const char *at_mnt(char *p, size_t len, const char *rel);
void write_file(const char *rel, uint32_t seed, size_t size, size_t at, int do_fsync);
int write_file_room(const char *rel, uint32_t seed, size_t size);
void fsync_path(const char *rel);
void fdatasync_path(const char *rel);
void truncate_file(const char *rel, size_t size);
/* zlfs-ctl gc: collect up to ZONES zones now and checkpoint; how many were emptied. */
unsigned gc_now(unsigned zones);
void rename_path(const char *from, const char *to);
void unlink_path(const char *rel);
void mkdir_path(const char *rel);
void rmdir_path(const char *rel);
void ctl_sync(void);
/* Extended attributes, as a script of operations in the order made (one state each): set
 * attribute user.xID of REL to LEN bytes of SEED's pattern, or remove it. */
void xattr_set_path(const char *rel, unsigned id, size_t len, uint32_t seed);
void xattr_rm_path(const char *rel, unsigned id);
/* NULL when the file at PATH has exactly the attributes the first XOPS operations on PATH
 * left, else why not (in WHY). */
const char *xattr_match(const char *path, uint32_t xops, char *why, size_t wl);
int root_encrypted(void);

/* ---- crash points and stages ---------------------------------------------------------- */

void focus_begin(void);
void focus_end(void);
int in_focus(long n);
struct stage *stage_next(void);
void stage_seal(struct stage *s);
struct file_exp *stage_file(struct stage *s, const char *path);
void stage_drop(struct stage *s, const char *path);
void stage_take(struct stage *s, const char *path);
void stage_take_dir(struct stage *s, const char *dir);
void stage_take_all(struct stage *s);

/* ---- the workloads (test_crash_workloads.c) and one crash point (test_crash_check.c) ---- */

/* Operations the workloads share (test_crash_workloads.c): fallocate MODE of REL, fsync'ed
 * (the caller tells the model); a stage of what REL, or the root directory, holds now (after its fsync); a record
 * of N bytes of SEED appended through FD at REL's end *SIZE (which grows by N). */
void falloc_path(const char *rel, int mode, size_t off, size_t len);
void stage_file_now(const char *rel);
void stage_root_now(void);
void append_record(int fd, const char *rel, uint32_t seed, size_t *size, size_t n);
void append_logs(const char *const rel[2], const uint32_t seed[2], size_t size[2]);

void workload(void);
void workload_gc(void);
void workload_overwrite(void);
void workload_unlink_open(void);
void workload_dirs(void);
void workload_small(void);
void workload_checkpoint(void);
void workload_full(void);
void workload_reserve(void);
void workload_encrypted(void);
void workload_threads(void);
void workload_falloc(void);
void workload_punch(void);
void workload_hot(void);
void workload_fsync(void);
void workload_tail(void);
void workload_inline(void);
void workload_xattr(void);
void workload_compressed(void); /* test_crash_compress.c */
void workload_packed(void);     /* test_crash_packed.c */
void workload_span(void);       /* test_crash_packed.c */
void workload_dentry(void);
void workload_idirs(void);
/* Rebuild the device at logged operation N (TORN: that write cut short), mount, compare, write
 * more, unmount, remount, fsck. NULL when the point passes, else why it failed (in WHY). With
 * LOSE_ZONE set (not UINT32_MAX), the writes to it from operation LOSE_FROM on are lost. */
extern uint32_t lose_zone;
extern long lose_from;
const char *try_point(long n, int torn, char *why, size_t wl);

#endif
