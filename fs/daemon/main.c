/*
 * main.c - the zlfs daemon: zlfs [options] DEVICE MOUNTPOINT.
 *
 * Owns: the command line and -o options, mounting the filesystem before detaching (so every
 * refusal is printed on the terminal), the FUSE session and its multithreaded loop, and the
 * clean unmount when the session ends.
 * May call: fuse_ops.h, core.h (zlfs_mount), cluster.h (the compress= option), log.h,
 * libfuse.
 */
#define FUSE_USE_VERSION 314
#include "cluster.h"
#include "files.h"
#include "fuse_ops.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zlfs_cli {
	char *device;
	char *wb_policy, *wb_budget, *wb_slot, *wb_superpage, *meta_cache;
	int no_gc;
	unsigned gc_high, gc_low, gc_idle_ms, gc_boost_zones, gc_valid_thresh, pe_cycles;
	int ro, direct_dev, direct_io, writeback, verbose;
	unsigned cp_interval, wait_secs, tail_blocks, tail_secs, read_cache_blocks;
	int noinline_data, noinline_dentry;
	double entry_timeout, attr_timeout;
	char *keyfile;
	char *compress, *compress_ext, *nocompress_ext;
	int passphrase, passphrase_fd, encrypt_all;
	int show_help, show_version;
	int remount;
};

#define OPT(t, p, v) {t, offsetof(struct zlfs_cli, p), v}
static const struct fuse_opt cli_opts[] = {
	OPT("ro", ro, 1),
	OPT("rw", ro, 0),
	OPT("remount", remount, 1),
	OPT("dev_direct", direct_dev, 1),
	OPT("direct_io", direct_io, 1),
	OPT("writeback_cache", writeback, 1),
	OPT("cp_interval=%u", cp_interval, 0),
	OPT("tail_blocks=%u", tail_blocks, 0),
	OPT("tail_secs=%u", tail_secs, 0),
	OPT("read_cache_blocks=%u", read_cache_blocks, 0),
	OPT("noinline_data", noinline_data, 1),
	OPT("noinline_dentry", noinline_dentry, 1),
	OPT("entry_timeout=%lf", entry_timeout, 0),
	OPT("attr_timeout=%lf", attr_timeout, 0),
	OPT("wait=%u", wait_secs, 0),
	OPT("verbose", verbose, 1),
	OPT("wb_policy=%s", wb_policy, 0),
	OPT("nogc", no_gc, 1),
	OPT("gc_high=%u", gc_high, 0),
	OPT("gc_low=%u", gc_low, 0),
	OPT("gc_idle_ms=%u", gc_idle_ms, 0),
	OPT("gc_boost_zones=%u", gc_boost_zones, 0),
	OPT("gc_valid_thresh=%u", gc_valid_thresh, 0),
	OPT("pe_cycles=%u", pe_cycles, 0),
	OPT("wb_budget=%s", wb_budget, 0),
	OPT("meta_cache=%s", meta_cache, 0),
	OPT("wb_slot=%s", wb_slot, 0),
	OPT("wb_superpage=%s", wb_superpage, 0),
	OPT("keyfile=%s", keyfile, 0),
	OPT("passphrase", passphrase, 1),
	OPT("passphrase_fd=%d", passphrase_fd, 0),
	OPT("encrypt_all", encrypt_all, 1),
	OPT("compress=%s", compress, 0),
	OPT("compress_extension=%s", compress_ext, 0),
	OPT("nocompress_extension=%s", nocompress_ext, 0),
	OPT("-h", show_help, 1),
	OPT("--help", show_help, 1),
	OPT("-V", show_version, 1),
	OPT("--version", show_version, 1),
	FUSE_OPT_KEY("ro", FUSE_OPT_KEY_KEEP),
	FUSE_OPT_END};

static int cli_arg(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct zlfs_cli *c = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && !c->device) {
		c->device = strdup(arg);
		return 0;
	}
	return 1;
}

static void usage(const char *prog)
{
	struct gc_opts d;

	gc_defaults(&d);
	printf("usage: %s [options] DEVICE MOUNTPOINT\n"
	       "Mount the zlfs filesystem on DEVICE (a zoned block device or a zlfs-emu image).\n\n"
	       "zlfs options (-o):\n"
	       "    ro                   mount read-only\n"
	       "    remount              with ro or rw: switch the filesystem mounted on\n"
	       "                         MOUNTPOINT in place (mount -o remount,ro)\n"
	       "    cp_interval=SECS     checkpoint every SECS seconds while dirty (default 30;\n"
	       "                         0: only on sync, fsync and unmount)\n"
	       "    tail_blocks=N        partial blocks at files' ends kept in memory until they\n"
	       "                         fill, fsync, close or a checkpoint (default %u; 0: none)\n"
	       "    tail_secs=SECS       and about SECS seconds at most (default %u; 0: no limit)\n"
	       "    read_cache_blocks=N  blocks of short writes kept for reading them again\n"
	       "                         (default %u; 0: none; see zlfs(8))\n"
	       "    noinline_data        new files of at most 3,908 bytes take a data block, not\n"
	       "                         their inode's room (default: inline, when mkfs set it)\n"
	       "    noinline_dentry      small directories keep a dentry block, not their inode's\n"
	       "                         room (default: inline; the first turns INLINE_DENTRIES on)\n"
	       "    entry_timeout=SECS   how long the kernel may keep names, found or not\n"
	       "                         (default 86400: zlfs is its device's only writer)\n"
	       "    attr_timeout=SECS    how long the kernel may keep attributes (default 86400)\n"
	       "    direct_io            bypass the kernel page cache for file data\n"
	       "    writeback_cache      let the kernel cache writes\n"
	       "    dev_direct           emulated images: O_DIRECT on the image file\n"
	       "    wait=SECS            DEVICE held by a zlfs daemon finishing its unmount: wait\n"
	       "                         up to SECS for it (default %u; 0: fail at once)\n"
	       "    wb_policy=dynamic|static  write buffer: program-unit slots shared by all open\n"
	       "                         zones (default), or one superpage buffer per zone\n"
	       "    wb_budget=SIZE       write buffer memory (default 4M)\n"
	       "    wb_slot=SIZE         dynamic slot size, one program unit (default 192K)\n"
	       "    wb_superpage=SIZE    static buffer size per zone (default 768K)\n"
	       "    meta_cache=SIZE      memory for NAT and SIT pages, read on demand (default\n"
	       "                         32M; at least 128K)\n"
	       "    gc_high=PCT          background GC starts below PCT%% free zones (default 60)\n"
	       "    gc_low=PCT           boosted GC below PCT%% free zones, cleaning ahead (default:\n"
	       "                         below a target paced to the write rate)\n"
	       "    gc_valid_thresh=PCT  background GC takes only zones less than PCT%% valid\n"
	       "                         (default %u)\n"
	       "    gc_idle_ms=MS        normal GC waits for MS of user idleness (default 500)\n"
	       "    gc_boost_zones=N     zones a boosted GC pass empties at most (default 4)\n"
	       "    nogc                 no background GC (foreground GC still frees space)\n"
	       "    pe_cycles=N          P/E rating for the lifetime estimate (default 3000;\n"
	       "                         30000 for pSLC)\n"
	       "    verbose              log more, and the statistics at unmount\n"
	       "    keyfile=PATH         encrypted filesystems: the 64-byte master key file\n"
	       "    passphrase           encrypted filesystems: ask for the passphrase on the terminal\n"
	       "    passphrase_fd=N      read the passphrase from file descriptor N (scripts)\n"
	       "    encrypt_all          encrypt every new file and directory (needs the key)\n"
	       "                         without a key, encrypted files stay locked (ENOKEY)\n"
	       "    compress=lz4|zstd[:LEVEL]|none  compress new files' clusters (LEVEL 1-22;\n"
	       "                         default: mkfs's choice); needs a filesystem made\n"
	       "                         with mkfs.zlfs --compress\n"
	       "    compress_extension=EXT[:EXT...]  new regular files named *.EXT are compressed\n"
	       "                         whatever compress= says (\"*\": every file; up to 16,\n"
	       "                         15 bytes each, colons between; needs --compress)\n"
	       "    nocompress_extension=EXT[:EXT...]  new files named *.EXT are not compressed,\n"
	       "                         whatever compress=, compress_extension= or their\n"
	       "                         directory's chattr +c says\n\n"
	       "FUSE options:\n",
	       prog, ZFUSE_TAIL_BLOCKS, ZFUSE_TAIL_SECS, ZFUSE_READ_CACHE_BLOCKS, ZDEV_WAIT_DEFAULT, d.valid_thresh_pct);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* SIZE with an optional K/M/G suffix; 0 on a malformed value. */
static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	return *end || end == s ? 0 : v;
}

static int wb_options(const struct zlfs_cli *c, struct wbuf_opts *w)
{
	if (c->wb_policy && strcmp(c->wb_policy, "dynamic") && strcmp(c->wb_policy, "static")) {
		fprintf(stderr, "zlfs: wb_policy must be dynamic or static\n");
		return -1;
	}
	w->policy = c->wb_policy && !strcmp(c->wb_policy, "static") ? WBUF_STATIC : WBUF_DYNAMIC;
	if ((c->wb_budget && !(w->budget = parse_size(c->wb_budget))) ||
	    (c->wb_slot && !(w->slot_size = parse_size(c->wb_slot))) ||
	    (c->wb_superpage && !(w->superpage = parse_size(c->wb_superpage)))) {
		fprintf(stderr, "zlfs: write buffer sizes take a number with an optional K, M or G\n");
		return -1;
	}
	return 0;
}

static int gc_options(const struct zlfs_cli *c, struct gc_opts *g)
{
	gc_defaults(g);
	if (c->gc_high)
		g->high_pct = c->gc_high;
	if (c->gc_low)
		g->low_pct = c->gc_low;
	if (c->gc_idle_ms)
		g->idle_ms = c->gc_idle_ms;
	if (c->gc_boost_zones)
		g->boost_zones = c->gc_boost_zones;
	if (c->gc_valid_thresh)
		g->valid_thresh_pct = c->gc_valid_thresh;
	if (c->pe_cycles)
		g->pe_cycles = c->pe_cycles;
	if (g->low_pct > g->high_pct || g->high_pct > 100) {
		fprintf(stderr, "zlfs: need gc_low <= gc_high <= 100\n");
		return -1;
	}
	if (g->valid_thresh_pct > 100) {
		fprintf(stderr, "zlfs: gc_valid_thresh is a percentage, 1 to 100\n");
		return -1;
	}
	return 0;
}

/* The passphrase is never taken from the command line, where ps(1) would show it. */
/* compress_extension= and nocompress_extension=: each a valid list, no suffix in both. */
static int ext_options(const struct zlfs_cli *c, struct zlfs_mount_opts *mo)
{
	const char *bad = NULL;
	int ret = 0;

	if (c->compress_ext && (ret = cluster_ext_check(c->compress_ext, c->nocompress_ext)))
		bad = "compress_extension";
	else if (c->nocompress_ext && (ret = cluster_ext_check(c->nocompress_ext, NULL)))
		bad = "nocompress_extension";
	if (ret == -EEXIST)
		fprintf(stderr, "zlfs: a suffix is in both compress_extension= and "
				"nocompress_extension=\n");
	else if (ret)
		fprintf(stderr, "zlfs: %s takes suffixes separated by colons: at most %d, each 1 to "
				"%d bytes without '/' (\"*\": every name)\n", bad, CLUSTER_EXT_MAX,
			CLUSTER_EXT_LEN);
	mo->compress_ext = c->compress_ext;
	mo->nocompress_ext = c->nocompress_ext;
	return ret;
}

static int key_options(const struct zlfs_cli *c, struct zlfs_key_source *ks, char *pass,
		       size_t len)
{
	int n;

	memset(ks, 0, sizeof(*ks));
	ks->keyfile = c->keyfile;
	ks->encrypt_all = c->encrypt_all;
	if (!c->passphrase && c->passphrase_fd < 0)
		return 0;
	if (c->keyfile) {
		fprintf(stderr, "zlfs: give either keyfile= or a passphrase, not both\n");
		return -EINVAL;
	}
	n = zcrypt_passphrase_read(c->passphrase_fd,
				   "zlfs passphrase: ", pass, len);
	if (n < 0) {
		fprintf(stderr, "zlfs: cannot read the passphrase: %s\n",
			n == -ENOTTY ? "no terminal (use -o passphrase_fd=N)"
			: n == -EINVAL ? "it is empty" : strerror(-n));
		return n;
	}
	ks->passphrase = pass;
	return 0;
}

static int run(struct fuse_args *args, struct zlfs_cli *c, struct fuse_cmdline_opts *fo)
{
	struct zlfs_mount_opts mo = {.readonly = c->ro, .direct = c->direct_dev, .daemon = 1,
				     .wait_secs = c->wait_secs,
				     .noinline_dentry = c->noinline_dentry};
	struct zlfs_key_source ks;
	char pass[1024];
	struct gc_opts gco;
	struct zlfs_ops_opts oo = {.direct_io = c->direct_io, .writeback_cache = c->writeback,
				   .cp_interval = c->cp_interval, .background_gc = !c->no_gc,
				   .verbose = c->verbose, .entry_timeout = c->entry_timeout,
				   .attr_timeout = c->attr_timeout, .tail_blocks = c->tail_blocks,
				   .tail_secs = c->tail_secs, .noinline_data = c->noinline_data,
				   .read_cache_blocks = c->read_cache_blocks};
	struct fuse_loop_config *lc;
	struct fuse_session *se;
	struct zlfs_fs *fs;
	struct zfuse *z;
	int ret;

	if (wb_options(c, &mo.wb) || gc_options(c, &gco))
		return 2;
	if (c->meta_cache && (mo.meta_cache = parse_size(c->meta_cache)) < (128u << 10)) {
		fprintf(stderr, "zlfs: meta_cache takes a size of at least 128K (K, M or G)\n");
		return 2;
	}
	if (c->entry_timeout < 0 || c->attr_timeout < 0) {
		fprintf(stderr, "zlfs: entry_timeout and attr_timeout take seconds >= 0\n");
		return 2;
	}
	if (c->compress && cluster_opt_parse(c->compress, &mo.compress_alg, &mo.compress_level)) {
		fprintf(stderr, "zlfs: compress takes lz4, zstd, zstd:LEVEL (LEVEL 1 to 22) or "
			"none, not '%s'\n", c->compress);
		return 2;
	}
	mo.compress_given = c->compress != NULL;
	if (ext_options(c, &mo))
		return 2;
	mo.gc = &gco;
	ret = key_options(c, &ks, pass, sizeof(pass));
	mo.key = &ks;
	if (!ret)
		ret = files_mount(c->device, &mo, &fs);
	zcrypt_wipe(pass, sizeof(pass)); /* the master key is all the mount keeps */
	if (ret)
		return 1;
	z = zfuse_new(fs, &oo);
	se = z ? fuse_session_new(args, zlfs_fuse_ops(), sizeof(struct fuse_lowlevel_ops), z) : NULL;
	if (!se || fuse_set_signal_handlers(se) || fuse_session_mount(se, fo->mountpoint)) {
		zlog_err("cannot mount on %s", fo->mountpoint);
		if (se)
			fuse_session_destroy(se);
		return z ? (zfuse_destroy(z), 1) : (files_unmount(fs), 1);
	}
	if (!fo->foreground)
		zlfs_before_fork(fs);
	fuse_daemonize(fo->foreground);
	if (!fo->foreground)
		zlog_set_syslog(1);
	zlfs_serving(fs);
	zfuse_start(z, se);
	lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, fo->clone_fd);
	fuse_loop_cfg_set_max_threads(lc, fo->max_threads);
	ret = fo->singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	if (zfuse_destroy(z))
		ret = 1;
	return ret ? 1 : 0;
}

/* The mount's source is the device's absolute path, so that tools find the mount of a device
 * whatever path they were given (zdev_hold.c); commas and backslashes are escaped for
 * libfuse's option parser. */
static int mount_source(const char *device, char *out, size_t len)
{
	char *real = realpath(device, NULL);
	const char *p = real ? real : device;
	size_t n = (size_t)snprintf(out, len, "-ofsname=");
	int fits;

	for (; *p && n + 2 < len; p++) {
		if (*p == ',' || *p == '\\')
			out[n++] = '\\';
		out[n++] = *p;
	}
	fits = !*p;
	free(real);
	if (!fits || (size_t)snprintf(out + n, len - n, ",subtype=zlfs,default_permissions") >= len - n) {
		fprintf(stderr, "zlfs: %s: the device path is too long\n", device);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct zlfs_cli c = {.cp_interval = 30, .passphrase_fd = -1,
			     .tail_blocks = ZFUSE_TAIL_BLOCKS, .tail_secs = ZFUSE_TAIL_SECS,
			     .read_cache_blocks = ZFUSE_READ_CACHE_BLOCKS,
			     .entry_timeout = ZFUSE_DEFAULT_TIMEOUT,
			     .attr_timeout = ZFUSE_DEFAULT_TIMEOUT, .wait_secs = ZDEV_WAIT_DEFAULT};
	struct fuse_cmdline_opts fo;
	char fsname[PATH_MAX + 64];
	int ret;

	zlog_set_ident("zlfs");
	if (fuse_opt_parse(&args, &c, cli_opts, cli_arg) || fuse_parse_cmdline(&args, &fo)) {
		fprintf(stderr, "zlfs: bad options (see zlfs --help)\n");
		return 2;
	}
	if (c.show_help || fo.show_help) {
		usage(argv[0]);
		ret = 0;
	} else if (c.show_version || fo.show_version) {
		printf("zlfs %s (format revision %d), FUSE library %s\n", ZLFS_VERSION, ZLFS_REVISION,
		       fuse_pkgversion());
		ret = 0;
	} else if (c.remount && fo.mountpoint) {
		ret = remount_run(fo.mountpoint, c.ro); /* the mounted daemon, not a new one */
	} else if (!c.device || !fo.mountpoint) {
		fprintf(stderr, "usage: zlfs [options] DEVICE MOUNTPOINT (see zlfs --help)\n");
		ret = 2;
	} else if (mount_source(c.device, fsname, sizeof(fsname))) {
		ret = 2;
	} else if (!mount_again(c.device, fo.mountpoint, c.ro, &ret)) {
		if (c.verbose || fo.debug)
			zlog_set_level(ZLOG_DEBUG);
		fuse_opt_add_arg(&args, fsname);
		ret = run(&args, &c, &fo);
	}
	free(fo.mountpoint);
	free(c.device);
	free(c.wb_policy);
	free(c.wb_budget);
	free(c.meta_cache);
	free(c.wb_slot);
	free(c.wb_superpage);
	free(c.keyfile);
	free(c.compress);
	free(c.compress_ext);
	free(c.nocompress_ext);
	fuse_opt_free_args(&args);
	return ret;
}
