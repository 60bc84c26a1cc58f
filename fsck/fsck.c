/*
 * fsck.c - fsck.zlfs: check a zlfs filesystem and say what kind of trouble it is in.
 *
 * Owns: the command line in the style of fsck(8), the human and JSON reports, and the exit
 * codes. It tells a checkpoint mismatch (the host is behind the device after a crash; the
 * next mount rolls it forward) from a device write-pointer error (the device holds less than
 * the checkpoint says it acknowledged). It never resets a zone.
 * May call: check.h, files.h, core.h, log.h.
 *
 * This version checks only (-n); -p, -a and -y are accepted and report that repair is not
 * available yet, leaving errors uncorrected (exit 4).
 */
#include "verify.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FSCK_OK = 0, FSCK_UNCORRECTED = 4, FSCK_OPERATIONAL = 8, FSCK_USAGE = 16 };

struct fsck_args {
	const char *path;
	int repair, verbose, json;
};

static const char *const class_names[] = {"error", "checkpoint-mismatch", "device-write-pointer-error"};

struct findings {
	struct fsck_args *a;
	int n;
	long hidden;
};

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

#define FINDINGS_SHOWN 100

static void print_finding(void *arg, enum zlfs_finding_class cls, const char *msg)
{
	struct findings *f = arg;

	if (f->n >= FINDINGS_SHOWN && cls == ZLFS_FIND_ERROR) { /* counted, not listed */
		f->hidden++;
		return;
	}
	if (f->a->json) {
		printf("%s\n    {\"class\": \"%s\", \"message\": ", f->n ? "," : "", class_names[cls]);
		json_str(msg);
		putchar('}');
	} else {
		printf("%s: %s\n", class_names[cls], msg);
	}
	f->n++;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: fsck.zlfs [-n|-p|-a|-y] [-v] [--json] DEVICE\n"
		     "  -n       check only, change nothing (default)\n"
		     "  -p, -a   repair what is safe to repair automatically (not available yet)\n"
		     "  -y       repair everything repairable (not available yet)\n"
		     "  -v       verbose\n"
		     "  --json   machine-readable report on stdout\n"
		     "exit: 0 clean, 4 errors left uncorrected, 8 operational error, 16 usage error\n");
}

static int parse(int argc, char **argv, struct fsck_args *a)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"help", no_argument, NULL, 'h'},
					   {"version", no_argument, NULL, 'V'},
					   {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "npayvfCVh", lo, NULL)) != -1) {
		switch (c) {
		case 'n': a->repair = 0; break;
		case 'p': case 'a': case 'y': a->repair = 1; break;
		case 'v': a->verbose = 1; break;
		case 'f': case 'C': break; /* always a full check; no progress bar needed yet */
		case 'j': a->json = 1; break;
		case 'V': printf("fsck.zlfs %s (format revision %d)\n", ZLFS_VERSION, ZLFS_REVISION); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return FSCK_USAGE;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return FSCK_USAGE;
	}
	a->path = argv[optind];
	return 0;
}

static void report_head(struct zlfs_fs *fs, const struct fsck_args *a)
{
	const struct zdev_info *di = zdev_info(fs->dev);

	if (!a->json) {
		if (a->verbose)
			printf("%s: zlfs revision %u, checkpoint %llu, %s\n", a->path, fs->sb.revision,
			       (unsigned long long)fs->cp.version,
			       di->kind == ZDEV_KIND_EMU ? "emulated image" : di->model);
		return;
	}
	printf("{\n  \"device\": ");
	json_str(a->path);
	printf(",\n  \"storage_mode\": ");
	json_str(di->kind == ZDEV_KIND_EMU ? "emulated" : "zoned-block-device");
	printf(",\n  \"model\": ");
	json_str(di->model);
	printf(",\n  \"firmware\": ");
	json_str(di->firmware);
	printf(",\n  \"format_revision\": %u,\n  \"feature_compat\": %u,\n  \"feature_ro_compat\": "
	       "%u,\n  \"feature_incompat\": %u,\n  \"checkpoint_version\": %llu,\n"
	       "  \"free_zone_reserve\": %u,\n  \"findings\": [",
	       fs->sb.revision, fs->sb.feat_compat, fs->sb.feat_ro_compat, fs->sb.feat_incompat,
	       (unsigned long long)fs->cp.version, fs->sb.reserved_zones);
}

static int report_tail(const struct zlfs_check_report *r, const struct fsck_args *a, int code)
{
	if (a->json) {
		printf("\n  ],\n  \"errors\": %llu,\n  \"checkpoint_mismatches\": %llu,\n"
		       "  \"device_errors\": %llu,\n  \"inodes\": %llu,\n  \"dentries\": %llu,\n"
		       "  \"blocks\": %llu,\n  \"orphans\": %llu,\n  \"exit_code\": %d\n}\n",
		       (unsigned long long)r->errors, (unsigned long long)r->mismatches,
		       (unsigned long long)r->device_errors, (unsigned long long)r->inodes,
		       (unsigned long long)r->dentries, (unsigned long long)r->blocks,
		       (unsigned long long)r->orphans, code);
		return code;
	}
	printf("%s: %llu inodes, %llu directory entries, %llu blocks in use, %llu orphans\n",
	       a->path, (unsigned long long)r->inodes, (unsigned long long)r->dentries,
	       (unsigned long long)r->blocks, (unsigned long long)r->orphans);
	if (r->mismatches && !r->errors && !r->device_errors)
		printf("%s: checkpoint mismatch only: writes after the last checkpoint; the next "
		       "mount recovers them\n", a->path);
	if (r->device_errors)
		printf("%s: DEVICE WRITE-POINTER ERRORS: the device lost data it had acknowledged; "
		       "no zone was reset; copy what is readable with a read-only mount (-o ro)\n",
		       a->path);
	if (code == FSCK_OK)
		printf("%s: clean\n", a->path);
	else if (a->repair)
		printf("%s: errors left uncorrected: repair is not available in this version\n",
		       a->path);
	return code;
}

int main(int argc, char **argv)
{
	struct fsck_args a = {0};
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct zlfs_check_report rep = {0};
	struct findings f = {&a, 0, 0};
	struct zlfs_fs *fs;
	int ret;

	zlog_set_ident("fsck.zlfs");
	ret = parse(argc, argv, &a);
	if (ret)
		return ret < 0 ? FSCK_OK : ret;
	if (zlfs_mount(a.path, &mo, &fs))
		return FSCK_OPERATIONAL;
	rep.print = print_finding;
	rep.print_arg = &f;
	report_head(fs, &a);
	ret = zlfs_check(fs, &rep) ? FSCK_UNCORRECTED : FSCK_OK;
	if (f.hidden && !a.json)
		printf("... and %ld more errors of the same kinds\n", f.hidden);
	dir_cache_destroy(fs);
	zlfs_unmount(fs);
	return report_tail(&rep, &a, ret);
}
