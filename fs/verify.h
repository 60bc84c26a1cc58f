/*
 * verify.h - the consistency check (verify.c) that fsck.zlfs and the tests run against a
 * filesystem mounted read-only in memory.
 */
#ifndef ZLFS_CHECK_H
#define ZLFS_CHECK_H

#include "files.h"

enum zlfs_finding_class {
	ZLFS_FIND_ERROR = 0,  /* the metadata contradicts itself */
	ZLFS_FIND_MISMATCH,   /* checkpoint mismatch: the host is behind, recoverable by mount */
	ZLFS_FIND_DEVICE,     /* device write-pointer error: the device holds less than it should */
};

struct zlfs_check_report {
	void (*print)(void *arg, enum zlfs_finding_class cls, const char *msg);
	void *print_arg;
	uint64_t errors, mismatches, device_errors;
	uint64_t inodes, dentries, blocks, orphans;
};

/* Check FS (mounted read-only). 0 when no error or device error was found. */
int zlfs_check(struct zlfs_fs *fs, struct zlfs_check_report *rep);

#endif
