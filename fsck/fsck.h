/*
 * fsck.h - what fsck.c (the command, its passes and reports) and repair.c (the repairs the
 * check proposes) share: the run's state and the report lists.
 */
#ifndef ZLFS_FSCK_H
#define ZLFS_FSCK_H

#include "verify.h"

#include <stdint.h>

enum { FSCK_OK = 0, FSCK_CORRECTED = 1, FSCK_UNCORRECTED = 4, FSCK_OPERATIONAL = 8,
       FSCK_USAGE = 16 };
enum fsck_mode { MODE_CHECK = 0, MODE_PREEN, MODE_YES };

/* A repair may reveal another: a lost directory's link count, or the nodes and blocks of a
 * damaged inode once it is dropped. */
#define REPAIR_ROUNDS 6
#define FINDINGS_SHOWN 100

struct fsck_args {
	const char *path;
	enum fsck_mode mode;
	int verbose, json, progress;
	const char *keyfile;
	int passphrase, passphrase_fd;
	unsigned wait_secs;
};

/* One list of the report (findings, repairs, remaining): JSON commas and the cap. */
struct out_list {
	struct fsck_args *a;
	int n, quiet;
	long hidden;
	const char *prefix; /* text mode: before each line */
};

struct fsck_run {
	struct fsck_args a;
	struct zlfs_check_report first;  /* the read-only check */
	struct zlfs_check_report last;   /* the check after repairs */
	struct out_list found, repairs, left;
	int mount_err;        /* the read-only mount failed: negative errno */
	int changed;          /* something was written to repair the filesystem */
	int repaired_any;     /* the read-write mount or a repair changed the filesystem */
	int incomplete;       /* a repair was needed but could not be made */
	int made;             /* repairs made */
	int needs_key;        /* inodes left out of an encrypted /lost+found for want of the key */
	uint8_t *told;        /* per nid: why it was not repaired was said already */
	int root_encrypted;
	struct zlfs_key_source key; /* both unset: no key */
	char pass[1024];
	uint64_t scan_time;   /* recorded this run, or 0 */
	uint64_t last_scan;   /* as found on the device */
};

/* Add MSG to list L under KEY = VAL (JSON), or print it (text). */
void list_put(struct out_list *l, const char *key, const char *val, const char *msg);

/* A repair made: MSG goes to the report's list of repairs. */
void said(struct fsck_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One round of repairs: check, apply what the mode allows, write a checkpoint. The number of
 * repairs made, or a negative errno. */
int repair_round(struct fsck_run *r, struct zlfs_fs *fs);

#endif
