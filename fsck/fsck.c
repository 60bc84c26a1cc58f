/*
 * fsck.c - fsck.zlfs: check a zlfs filesystem, say what kind of trouble it is in, and repair
 * what its mode allows.
 *
 * Owns: the command line in the style of fsck(8) (-n check only, -p/-a safe repairs, -y every
 * repair), the passes (a read-only check first; then, to repair, a read-write mount whose
 * roll-forward and checkpoint settle checkpoint mismatches, rounds of repairs proposed by the
 * check and applied through the file layer, and a final check), recording the time of a clean
 * scan in the superblock, the human and JSON reports, and the exit codes. It tells a
 * checkpoint mismatch (the host is behind the device after a crash) from a device write-
 * pointer error (the device holds less than the checkpoint says it acknowledged), which is
 * never repaired. It never resets a zone itself; docs/fsck.md is the user's guide. On an
 * encrypted filesystem it runs with the master key when given one (--keyfile, --passphrase):
 * without it, everything but a name to add to an encrypted directory (/lost+found under an
 * encrypted root) is checked and repaired the same.
 * The repairs themselves are repair.c's.
 * May call: fsck.h (repair.c), verify.h, files.h, core.h, super.h, zdev.h, log.h,
 * crypto/zcrypt.h.
 */
#include "verify.h"
#include "log.h"
#include "zcrypt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "fsck.h"


static int key_given(const struct fsck_args *a)
{
	return a->keyfile || a->passphrase || a->passphrase_fd >= 0;
}

static const char *const class_names[] = {"error", "checkpoint-mismatch",
					  "device-write-pointer-error"};
static const char *const mode_names[] = {"check", "preen", "repair"};

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

/* One entry of a list: {"class": ..., "message": ...} or {"action": ..., "message": ...}. */
void list_put(struct out_list *l, const char *key, const char *val, const char *msg)
{
	if (l->quiet)
		return;
	if (l->n >= FINDINGS_SHOWN) { /* counted, not listed */
		l->hidden++;
		return;
	}
	if (l->a->json) {
		printf("%s\n    {\"%s\": \"%s\", \"message\": ", l->n ? "," : "", key, val);
		json_str(msg);
		putchar('}');
	} else {
		printf("%s%s: %s\n", l->prefix, val, msg);
	}
	l->n++;
}

static void print_finding(void *arg, enum zlfs_finding_class cls, const char *msg)
{
	list_put(arg, "class", class_names[cls], msg);
}

static void print_progress(void *arg, enum zlfs_check_phase ph, uint64_t done, uint64_t total)
{
	static const char *const names[] = {"", "zones", "tree", "links", "unreachable", "usage"};
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100;

	(void)arg;
	fprintf(stderr, "\rfsck.zlfs: pass %d/%d (%s): %3u%%%s", ph, ZLFS_PHASES, names[ph],
		pct > 100 ? 100 : pct, ph == ZLFS_PHASES && done >= total ? "\n" : "");
	fflush(stderr);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: fsck.zlfs [-n|-p|-a|-y] [-C] [-v] [--json] [KEY] [--wait SECS] DEVICE\n"
		     "  -n       check only, write nothing (default)\n"
		     "  -p, -a   safe automatic repairs: roll forward, orphans, counts, leaks\n"
		     "  -y       every repair: also /lost+found and dangling directory entries\n"
		     "  -C       progress on stderr\n"
		     "  -v       verbose\n"
		     "  --json   machine-readable report on stdout\n"
		     "  --wait SECS  DEVICE held by a zlfs daemon finishing its unmount: wait up\n"
		     "           to SECS for it (default %u; 0: fail at once)\n"
		     "KEY, for an encrypted filesystem (needed only to add names to an encrypted\n"
		     "/lost+found): --keyfile FILE, --passphrase (asked on the terminal) or\n"
		     "--passphrase-fd N\n"
		     "A clean -p/-y run records the scan time in the superblock; -n never writes.\n"
		     "exit: 0 clean, 1 errors corrected, 4 errors left uncorrected (device "
		     "write-pointer errors always), 8 operational error, 16 usage error\n"
		     "See docs/fsck.md.\n", ZDEV_WAIT_DEFAULT);
}

static int parse(int argc, char **argv, struct fsck_args *a)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"help", no_argument, NULL, 'h'},
					   {"version", no_argument, NULL, 'V'},
					   {"keyfile", required_argument, NULL, 'K'},
					   {"passphrase", no_argument, NULL, 'P'},
					   {"passphrase-fd", required_argument, NULL, 'D'},
					   {"wait", required_argument, NULL, 'w'},
					   {NULL, 0, NULL, 0}};
	char *end;
	int c, modes = 0;

	while ((c = getopt_long(argc, argv, "npayvfCVh", lo, NULL)) != -1) {
		switch (c) {
		case 'n': a->mode = MODE_CHECK; modes |= 1; break;
		case 'p': case 'a': a->mode = MODE_PREEN; modes |= 2; break;
		case 'y': a->mode = MODE_YES; modes |= 4; break;
		case 'v': a->verbose = 1; break;
		case 'f': break; /* always a full check */
		case 'C': a->progress = 1; break;
		case 'j': a->json = 1; break;
		case 'K': a->keyfile = optarg; break;
		case 'P': a->passphrase = 1; break;
		case 'D':
			a->passphrase_fd = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || a->passphrase_fd < 0) {
				fprintf(stderr, "fsck.zlfs: --passphrase-fd takes a file descriptor\n");
				return FSCK_USAGE;
			}
			break;
		case 'w':
			a->wait_secs = (unsigned)strtoul(optarg, &end, 10);
			if (end == optarg || *end || a->wait_secs > 86400) {
				fprintf(stderr, "fsck.zlfs: --wait takes seconds, 0 to 86400\n");
				return FSCK_USAGE;
			}
			break;
		case 'V': printf("fsck.zlfs %s (format revision %d)\n", ZLFS_VERSION, ZLFS_REVISION); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return FSCK_USAGE;
		}
	}
	if (modes & (modes - 1)) {
		fprintf(stderr, "fsck.zlfs: -n, -p/-a and -y exclude each other\n");
		return FSCK_USAGE;
	}
	if (!!a->keyfile + a->passphrase + (a->passphrase_fd >= 0) > 1) {
		fprintf(stderr, "fsck.zlfs: give one of --keyfile, --passphrase and --passphrase-fd\n");
		return FSCK_USAGE;
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return FSCK_USAGE;
	}
	a->path = argv[optind];
	return 0;
}

/* ---- the report ------------------------------------------------------------------------ */

static void json_kv(const char *key, const char *val)
{
	printf("  \"%s\": ", key);
	json_str(val);
	printf(",\n");
}

/* The same names as zlfs-ctl stats (fs/core/stats.c). FS is NULL when the mount failed. */
static void report_head_json(struct zlfs_fs *fs, const struct fsck_args *a)
{
	const struct zdev_info *di = fs ? zdev_info(fs->dev) : NULL;
	struct utsname u;

	printf("{\n");
	json_kv("device", a->path);
	json_kv("mode", mode_names[a->mode]);
	if (di) {
		json_kv("storage_mode", di->kind == ZDEV_KIND_EMU ? "emulated" : "zoned-block-device");
		json_kv("model", di->model);
		json_kv("vendor", di->vendor);
		json_kv("firmware", di->firmware);
	}
	if (!uname(&u)) {
		char kernel[600];

		snprintf(kernel, sizeof(kernel), "%s %s", u.release, u.version);
		json_kv("kernel", kernel);
	}
	if (fs)
		printf("  \"format_revision\": %u,\n  \"feature_compat\": %u,\n"
		       "  \"feature_ro_compat\": %u,\n  \"feature_incompat\": %u,\n"
		       "  \"checkpoint_version\": %llu,\n  \"free_zone_reserve\": %u,\n",
		       fs->sb.revision, fs->sb.feat_compat, fs->sb.feat_ro_compat,
		       fs->sb.feat_incompat, (unsigned long long)fs->cp.version,
		       seg_reserve(fs));
	printf("  \"findings\": [");
}

static int root_encrypted(struct zlfs_fs *fs)
{
	struct node_page *root;
	int enc;

	if (inode_get(fs, ZLFS_ROOT_INO, &root))
		return 0;
	enc = fcrypt_is_encrypted(root);
	node_put(fs, root);
	return enc;
}

static void report_head(struct zlfs_fs *fs, const struct fsck_args *a)
{
	const struct zdev_info *di;

	if (a->json) {
		report_head_json(fs, a);
		return;
	}
	if (!a->verbose || !fs)
		return;
	di = zdev_info(fs->dev);
	printf("%s: zlfs revision %u, features %u/%u/%u, checkpoint %llu, %s %s%s%s, "
	       "last clean scan %llu, mode %s\n", a->path, fs->sb.revision, fs->sb.feat_compat,
	       fs->sb.feat_ro_compat, fs->sb.feat_incompat, (unsigned long long)fs->cp.version,
	       di->kind == ZDEV_KIND_EMU ? "emulated image" : di->vendor,
	       di->kind == ZDEV_KIND_EMU ? "" : di->model, *di->firmware ? " firmware " : "",
	       di->firmware, (unsigned long long)fs->sb.last_fsck_time, mode_names[a->mode]);
	if (fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_ENCRYPT)
		printf("%s: encrypted filesystem, root directory %s, key %s\n", a->path,
		       root_encrypted(fs) ? "encrypted" : "not encrypted",
		       fs->master ? "loaded" : "not given");
}

static void list_open(struct out_list *l, const char *key)
{
	if (l->a->json)
		printf("\n  ],\n  \"%s\": [", key);
}

static void list_close(struct out_list *l)
{
	if (l->hidden && !l->a->json)
		printf("... and %ld more of the same kinds\n", l->hidden);
}

static void report_json_tail(const struct fsck_run *r, int code)
{
	const struct zlfs_check_report *f = &r->first, *l = &r->last;
	int repaired = r->a.mode != MODE_CHECK && !r->mount_err && !f->device_errors;

	printf("\n  ],\n  \"errors\": %llu,\n  \"checkpoint_mismatches\": %llu,\n"
	       "  \"device_errors\": %llu,\n  \"inodes\": %llu,\n  \"dentries\": %llu,\n"
	       "  \"blocks\": %llu,\n  \"orphans\": %llu,\n  \"repairs_made\": %d,\n"
	       "  \"remaining_errors\": %llu,\n  \"root_encrypted\": %s,\n"
	       "  \"key_loaded\": %s,\n  \"needs_key\": %d,\n"
	       "  \"last_consistency_scan\": %llu,\n"
	       "  \"scan_recorded\": %s,\n  \"exit_code\": %d\n}\n",
	       (unsigned long long)f->errors, (unsigned long long)f->mismatches,
	       (unsigned long long)f->device_errors, (unsigned long long)f->inodes,
	       (unsigned long long)f->dentries, (unsigned long long)f->blocks,
	       (unsigned long long)f->orphans, r->made,
	       (unsigned long long)(repaired ? l->errors + l->device_errors
					     : f->errors + f->device_errors),
	       r->root_encrypted ? "true" : "false",
	       key_given(&r->a) && !r->mount_err ? "true" : "false",
	       r->needs_key, (unsigned long long)(r->scan_time ? r->scan_time : r->last_scan),
	       r->scan_time ? "true" : "false", code);
}

static void report_text_tail(const struct fsck_run *r, int code)
{
	const struct zlfs_check_report *f = &r->first;
	const char *p = r->a.path;

	if (!r->mount_err)
		printf("%s: %llu inodes, %llu directory entries, %llu blocks in use, %llu orphans\n",
		       p, (unsigned long long)f->inodes, (unsigned long long)f->dentries,
		       (unsigned long long)f->blocks, (unsigned long long)f->orphans);
	if (f->mismatches && !f->errors && !f->device_errors && r->a.mode == MODE_CHECK)
		printf("%s: checkpoint mismatch only: writes after the last checkpoint; the next "
		       "mount or fsck.zlfs -p rolls them forward\n", p);
	if (f->device_errors)
		printf("%s: DEVICE WRITE-POINTER ERRORS: the device lost data it had acknowledged; "
		       "nothing was repaired and no zone was reset; copy what is readable with a "
		       "read-only mount (-o ro)\n", p);
	if (r->needs_key)
		printf("%s: %d unnamed inode%s left as found, intact: /lost+found is encrypted and "
		       "names in it need the key (run fsck.zlfs -y with --keyfile FILE, --passphrase "
		       "or --passphrase-fd N)\n", p, r->needs_key, r->needs_key == 1 ? "" : "s");
	if (r->scan_time)
		printf("%s: clean scan recorded in the superblock\n", p);
	if (code == FSCK_OK)
		printf("%s: clean\n", p);
	else if (code == FSCK_CORRECTED)
		printf("%s: errors corrected (%d repairs): the filesystem is clean\n", p, r->made);
	else if (r->a.mode == MODE_PREEN && !f->device_errors && !r->mount_err)
		printf("%s: errors left uncorrected: run fsck.zlfs -y%s\n", p,
		       r->root_encrypted && !key_given(&r->a)
			       ? " (with the key: the root directory is encrypted)" : "");
	else
		printf("%s: errors left uncorrected\n", p);
}

/* The superblock record gets the scan time: into the zone not holding the newest record. */
static int record_scan(struct fsck_run *r, struct zlfs_fs *fs)
{
	struct zlfs_sb_info sb = fs->sb;
	int ret;

	sb.last_fsck_time = (uint64_t)time(NULL);
	sb.sb_seq++;
	ret = zlfs_sb_write(fs->dev, &sb, fs->sb_zone);
	if (ret) {
		fprintf(stderr, "fsck.zlfs: %s: cannot record the scan time: %s\n", r->a.path,
			strerror(-ret));
		return ret;
	}
	fs->sb = sb;
	fs->sb_zone = !fs->sb_zone;
	r->scan_time = sb.last_fsck_time;
	return 0;
}

/* ---- passes ---------------------------------------------------------------------------- */

/* Zones the device took away (offline, read-only) may explain a mount that failed: they are
 * device errors, whatever they held. */
static void report_lost_zones(struct fsck_run *r)
{
	struct zdev_open_opts oo = {.readonly = 1, .wait_secs = r->a.wait_secs};
	struct zdev_zone z;
	struct zdev *dev;
	char msg[160];
	uint32_t i;

	if (zdev_open(r->a.path, &oo, &dev))
		return;
	for (i = 0; i < zdev_geometry(dev)->nr_zones; i++) {
		if (zdev_report_one(dev, i, &z) ||
		    (z.cond != ZDEV_COND_OFFLINE && z.cond != ZDEV_COND_RDONLY))
			continue;
		snprintf(msg, sizeof(msg), "zone %u is %s", i, zdev_cond_name(z.cond));
		r->first.device_errors++;
		print_finding(&r->found, ZLFS_FIND_DEVICE, msg);
	}
	zdev_close(dev);
}

/* The key given was refused (a wrong key, not a key file, a filesystem made without
 * encryption; key_load said which) rather than the filesystem damaged: without it, it mounts. */
static int key_refused(struct fsck_run *r, int err)
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct zlfs_fs *fs;

	if (!key_given(&r->a))
		return 0;
	if (err == -EKEYREJECTED)
		return 1;
	if (files_mount(r->a.path, &mo, &fs))
		return 0;
	files_unmount(fs);
	return 1;
}

/* A mount failure: the device could not be used or the key was refused (8), or its metadata
 * is damaged (4). */
static int mount_failure(struct fsck_run *r, int err)
{
	char msg[320];

	r->mount_err = err;
	if (key_refused(r, err)) {
		fprintf(stderr, "fsck.zlfs: %s: cannot check with this key; nothing was written\n",
			r->a.path);
		return FSCK_OPERATIONAL;
	}
	if (access(r->a.path, F_OK) || err == -ENOENT || err == -ENODEV || err == -EBUSY ||
	    err == -EACCES || err == -EPERM || err == -ENOMEM || err == -EPROTONOSUPPORT ||
	    err == -EROFS) {
		fprintf(stderr, "fsck.zlfs: %s: cannot check: %s\n", r->a.path, strerror(-err));
		return FSCK_OPERATIONAL;
	}
	snprintf(msg, sizeof(msg), "the superblock or the newest checkpoint cannot be used (%s): "
		 "no repair is attempted", strerror(-err));
	r->first.errors++;
	print_finding(&r->found, ZLFS_FIND_ERROR, msg);
	report_lost_zones(r);
	return FSCK_UNCORRECTED;
}

static const struct zlfs_key_source *key_of(const struct fsck_run *r)
{
	return key_given(&r->a) ? &r->key : NULL;
}

/* The read-only pass reads every node of the filesystem once: past the host's page cache
 * where PATH is an image on a file system that allows O_DIRECT (a zoned block device is
 * always read so), since caching what is read once only costs a copy and evicts the rest. */
static int direct_ok(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* The read-only pass: what -n reports, and what decides whether repair may run. */
static int check_readonly(struct fsck_run *r)
{
	struct zlfs_mount_opts mo = {.readonly = 1, .key = key_of(r), .wait_secs = r->a.wait_secs,
				     .direct = direct_ok(r->a.path)};
	struct zlfs_fs *fs;
	int ret = files_mount(r->a.path, &mo, &fs);

	if (!ret && (ret = mcache_verify_all(fs))) /* the mount reads NAT and SIT on demand */
		files_unmount(fs);
	if (ret) {
		if (r->a.json)
			report_head(NULL, &r->a);
		return mount_failure(r, ret);
	}
	r->last_scan = fs->sb.last_fsck_time;
	r->root_encrypted = root_encrypted(fs);
	report_head(fs, &r->a);
	r->first.print = print_finding;
	r->first.print_arg = &r->found;
	if (r->a.progress)
		r->first.progress = print_progress;
	zlfs_check(fs, &r->first);
	if (fs->dirty && !r->first.mismatches && !r->first.device_errors) {
		r->first.mismatches++;
		print_finding(&r->found, ZLFS_FIND_MISMATCH, "the device holds writes after the last "
			      "checkpoint (roll-forward or a cut checkpoint): the next mount or "
			      "fsck.zlfs -p settles them");
	}
	files_unmount(fs);
	return r->first.errors || r->first.device_errors ? FSCK_UNCORRECTED : FSCK_OK;
}

/* Read-write: mount (roll forward, free orphans, checkpoint), repair rounds, final check. */
static int repair(struct fsck_run *r)
{
	struct zlfs_mount_opts mo = {.key = key_of(r), .wait_secs = r->a.wait_secs};
	struct zlfs_fs *fs;
	int ret = files_mount(r->a.path, &mo, &fs), round, made = 0;

	if (ret) {
		fprintf(stderr, "fsck.zlfs: %s: read-write mount failed: %s\n", r->a.path,
			strerror(-ret));
		return FSCK_UNCORRECTED;
	}
	r->told = calloc(fs->sb.max_nid, 1);
	if (r->first.mismatches || r->first.orphans)
		said(r, "rolled forward to the device's write pointers and wrote checkpoint %llu "
		     "(%llu orphans freed)", (unsigned long long)fs->cp.version,
		     (unsigned long long)r->first.orphans);
	for (round = 0, ret = 1; round < REPAIR_ROUNDS && ret > 0; round++) {
		ret = repair_round(r, fs);
		made += ret > 0 ? ret : 0;
	}
	r->left.quiet = 0;
	r->last.print = print_finding;
	r->last.print_arg = &r->left;
	list_open(&r->left, "remaining");
	if (ret >= 0)
		zlfs_check(fs, &r->last);
	if (ret >= 0 && !r->last.errors && !r->last.device_errors)
		record_scan(r, fs);
	ret = files_unmount(fs) ?: ret;
	free(r->told);
	r->told = NULL;
	if (ret < 0 || r->last.errors || r->last.device_errors)
		return FSCK_UNCORRECTED;
	return made || r->first.errors || r->first.mismatches || r->first.orphans ? FSCK_CORRECTED
										   : FSCK_OK;
}

/* The key source for the mounts; a passphrase is read once, before anything is opened. */
static int key_setup(struct fsck_run *r)
{
	int n;

	r->key.keyfile = r->a.keyfile;
	if (!r->a.passphrase && r->a.passphrase_fd < 0)
		return 0;
	n = zcrypt_passphrase_read(r->a.passphrase ? -1 : r->a.passphrase_fd,
				   "zlfs passphrase: ", r->pass, sizeof(r->pass));
	if (n < 0) {
		fprintf(stderr, "fsck.zlfs: cannot read the passphrase: %s\n",
			n == -ENOTTY ? "no terminal (use --passphrase-fd N)"
			: n == -EINVAL ? "it is empty" : strerror(-n));
		return FSCK_OPERATIONAL;
	}
	r->key.passphrase = r->pass;
	return 0;
}

static int run(struct fsck_run *r)
{
	int code = check_readonly(r);

	list_close(&r->found);
	if (code == FSCK_OPERATIONAL && !r->a.json)
		return code;
	if (r->a.mode != MODE_CHECK && !r->mount_err && !r->first.device_errors) {
		list_open(&r->repairs, "repairs");
		code = repair(r);
		list_close(&r->repairs);
		list_close(&r->left);
	}
	if (r->a.json)
		report_json_tail(r, code);
	else
		report_text_tail(r, code);
	return code;
}

int main(int argc, char **argv)
{
	static struct fsck_run r; /* the passphrase buffer: off the stack, wiped at the end */
	int code;

	zlog_set_ident("fsck.zlfs");
	r.a.passphrase_fd = -1;
	r.a.wait_secs = ZDEV_WAIT_DEFAULT;
	code = parse(argc, argv, &r.a);
	if (code)
		return code < 0 ? FSCK_OK : code;
	if (!r.a.verbose)
		zlog_set_level(ZLOG_WARN);
	code = key_setup(&r);
	if (code)
		return code;
	r.found = (struct out_list){&r.a, 0, 0, 0, ""};
	r.repairs = (struct out_list){&r.a, 0, 0, 0, ""};
	r.left = (struct out_list){&r.a, 0, 0, 0, "left uncorrected: "};
	code = run(&r);
	zcrypt_wipe(r.pass, sizeof(r.pass));
	return code;
}
