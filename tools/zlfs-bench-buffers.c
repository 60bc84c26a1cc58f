/*
 * zlfs-bench-buffers.c - the C driver of tools/bench-buffers: one multi-stream write workload
 * on a zlfs-emu image with a timing model, through the real file layer and write buffer, and
 * the simulated time it took.
 *
 * Owns: the workload (STREAMS large files written round robin in CHUNK pieces, each fsync'ed
 * every FSYNC_EVERY bytes, a small file created every SMALL_EVERY rounds) and one CSV line.
 * May call: files.h, core.h, wbuf.h, zdev_emu.h (public APIs only).
 *
 * Runs in one thread, so the device sees the same operations in the same order on every run:
 * the simulated time is deterministic (the write buffer's flusher thread only writes what the
 * workload queued, in queue order). The emulator's clock is reset once the filesystem is
 * mounted; it stops when a final sync has made everything durable.
 */
#include "core.h"
#include "files.h"
#include "wbuf.h"
#include "zdev_emu.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#define MAX_STREAMS 64

struct bench_args {
	const char *image;
	struct wbuf_opts wb;
	uint32_t streams;
	uint64_t file_size, chunk, fsync_every;
	uint32_t small_every;
	int header;
	int header_only;
};

static const char usage_text[] =
	"usage: zlfs-bench-buffers IMAGE [--policy dynamic|static] [--budget SIZE] [--slot SIZE]\n"
	"         [--superpage SIZE] [--streams N] [--file-size SIZE] [--chunk SIZE]\n"
	"         [--fsync-every SIZE] [--small-every N] [--header]\n"
	"       zlfs-bench-buffers --csv-header\n"
	"  IMAGE must hold a fresh zlfs (mkfs.zlfs) on a zlfs-emu image with a timing model.\n"
	"  Prints one CSV line (--header: the column names first; --csv-header: only them).\n";

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_args *a)
{
	static const struct option lopts[] = {
		{"policy", required_argument, NULL, 'p'}, {"budget", required_argument, NULL, 'b'},
		{"slot", required_argument, NULL, 's'}, {"superpage", required_argument, NULL, 'S'},
		{"streams", required_argument, NULL, 'n'}, {"file-size", required_argument, NULL, 'f'},
		{"chunk", required_argument, NULL, 'c'}, {"fsync-every", required_argument, NULL, 'y'},
		{"small-every", required_argument, NULL, 'm'}, {"header", no_argument, NULL, 'H'},
		{"csv-header", no_argument, NULL, 'C'}, {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c, bad;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		bad = 0;
		switch (c) {
		case 'p':
			bad = strcmp(optarg, "dynamic") && strcmp(optarg, "static");
			a->wb.policy = !strcmp(optarg, "static") ? WBUF_STATIC : WBUF_DYNAMIC;
			break;
		case 'b': bad = parse_size(optarg, &a->wb.budget); break;
		case 's': bad = parse_size(optarg, &a->wb.slot_size); break;
		case 'S': bad = parse_size(optarg, &a->wb.superpage); break;
		case 'n':
			bad = parse_size(optarg, &v) || !v || v > MAX_STREAMS;
			a->streams = (uint32_t)v;
			break;
		case 'f': bad = parse_size(optarg, &a->file_size); break;
		case 'c': bad = parse_size(optarg, &a->chunk) || !a->chunk; break;
		case 'y': bad = parse_size(optarg, &a->fsync_every); break;
		case 'm':
			bad = parse_size(optarg, &v) || v > UINT32_MAX;
			a->small_every = (uint32_t)v;
			break;
		case 'H': a->header = 1; break;
		case 'C': a->header_only = 1; break;
		default: return -EINVAL;
		}
		if (bad) {
			fprintf(stderr, "zlfs-bench-buffers: bad value '%s'\n", optarg);
			return -EINVAL;
		}
	}
	if (a->header_only)
		return argc - optind ? -EINVAL : 0;
	if (argc - optind != 1)
		return -EINVAL;
	a->image = argv[optind];
	return 0;
}

/* Create a regular file NAME in the root directory, as the FUSE create does. */
static int create_file(struct zlfs_fs *fs, const char *name, struct node_page **out)
{
	struct node_page *root, *np;
	int ret;

	ret = inode_get(fs, ZLFS_ROOT_INO, &root);
	if (ret)
		return ret;
	ret = inode_new(fs, S_IFREG | 0644, 0, 0, 0, root->nid, &np);
	if (!ret) {
		ret = dir_add(fs, root, name, strlen(name), np->nid, DT_REG);
		if (ret)
			node_put(fs, np);
		else
			*out = np;
	}
	inode_touch(fs, root, INODE_MTIME | INODE_CTIME);
	node_put(fs, root);
	return ret;
}

/* Append LEN bytes of BUF to INO at OFF. */
static int write_at(struct zlfs_fs *fs, uint32_t ino, const void *buf, uint64_t len, uint64_t off)
{
	struct node_page *np;
	int ret = inode_get(fs, ino, &np);

	if (ret)
		return ret;
	ret = data_write(fs, np, buf, len, off);
	node_put(fs, np);
	return ret < 0 ? ret : 0;
}

/* A 4 KiB file: a directory entry (hot data), an inode (node logs). */
static int small_file(struct zlfs_fs *fs, uint32_t n, const void *buf)
{
	struct node_page *np;
	char name[32];
	uint32_t ino;
	int ret;

	snprintf(name, sizeof(name), "small-%06u", n);
	ret = create_file(fs, name, &np);
	if (ret)
		return ret;
	ino = np->nid;
	node_put(fs, np);
	return write_at(fs, ino, buf, 4096, 0);
}

/* One round: CHUNK bytes to every stream, fsync where due. */
static int round_once(struct zlfs_fs *fs, const struct bench_args *a, const uint32_t *ino,
		      uint64_t off, const uint8_t *buf)
{
	uint64_t len = a->chunk < a->file_size - off ? a->chunk : a->file_size - off;
	int ret = 0;

	for (uint32_t i = 0; i < a->streams && !ret; i++) {
		ret = write_at(fs, ino[i], buf, len, off);
		if (!ret && a->fsync_every && (off + len) / a->fsync_every != off / a->fsync_every)
			ret = files_fsync(fs, ino[i]);
	}
	return ret;
}

static int workload(struct zlfs_fs *fs, const struct bench_args *a, uint64_t *user)
{
	uint32_t ino[MAX_STREAMS], round = 0, nsmall = 0;
	uint8_t *buf = malloc(a->chunk);
	struct node_page *np;
	char name[32];
	int ret = buf ? 0 : -ENOMEM;

	for (uint64_t i = 0; buf && i < a->chunk; i++)
		buf[i] = (uint8_t)(i * 131 + 7); /* contents do not matter, only their amount */
	for (uint32_t i = 0; !ret && i < a->streams; i++) {
		snprintf(name, sizeof(name), "stream-%02u", i);
		ret = create_file(fs, name, &np);
		if (!ret) {
			ino[i] = np->nid;
			node_put(fs, np);
		}
	}
	for (uint64_t off = 0; !ret && off < a->file_size; off += a->chunk, round++) {
		ret = round_once(fs, a, ino, off, buf);
		if (!ret && a->small_every && round % a->small_every == a->small_every - 1) {
			ret = small_file(fs, nsmall++, buf);
			*user += 4096;
		}
	}
	*user += a->file_size * a->streams;
	free(buf);
	return ret;
}

static const char csv_header[] =
	"policy,budget,slot,superpage,streams,file_size,chunk,fsync_every,user_bytes,sim_ns,"
	"mbps,xfer_bytes,programs,pad_programs,pad_bytes,link_busy_ns,die_busy_ns,buf_wait_ns,"
	"wb_waits,wb_nslots,dies,prog_unit,prog_ns,link_mbs";

static void print_csv(const struct bench_args *a, const struct wbuf_opts *w, uint64_t user,
		      const struct zemu_stats *st, const struct wbuf_stats *ws)
{
	double mbps = st->sim_ns ? (double)user * 1e3 / (double)st->sim_ns : 0;

	if (a->header)
		printf("%s\n", csv_header);
	printf("%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64
	       ",%" PRIu64 ",%" PRIu64 ",%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
	       ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u,%u,%u,%u,%u\n",
	       w->policy == WBUF_STATIC ? "static" : "dynamic", w->budget, w->slot_size,
	       w->superpage, a->streams, a->file_size, a->chunk, a->fsync_every, user, st->sim_ns,
	       mbps, st->xfer_bytes, st->programs, st->pad_programs, st->pad_bytes,
	       st->link_busy_ns, st->die_busy_ns, st->buf_wait_ns, ws->waits, ws->nslots,
	       st->timing.dies, st->timing.prog_unit, st->timing.prog_ns, st->timing.link_mbs);
}

/* The defaults wbuf applies to zero fields, so the CSV says what actually ran. */
static void fill_wb_defaults(struct wbuf_opts *w)
{
	if (!w->budget)
		w->budget = WBUF_DEFAULT_BUDGET;
	if (!w->slot_size)
		w->slot_size = WBUF_DEFAULT_SLOT;
	if (!w->superpage)
		w->superpage = WBUF_DEFAULT_SUPERPAGE;
}

static int run(const struct bench_args *a)
{
	struct zlfs_mount_opts mo = {.wb = a->wb};
	struct zemu_stats st;
	struct wbuf_stats ws;
	struct zlfs_fs *fs;
	uint64_t user = 0;
	int ret;

	fill_wb_defaults(&mo.wb);
	ret = files_mount(a->image, &mo, &fs);
	if (ret) {
		fprintf(stderr, "zlfs-bench-buffers: %s: cannot mount: %s\n", a->image, strerror(-ret));
		return ret;
	}
	ret = zemu_timing_reset(fs->dev);
	if (!ret)
		ret = zemu_dev_stats(fs->dev, &st);
	if (!ret && !st.timing.dies) {
		fprintf(stderr, "zlfs-bench-buffers: %s has no timing model (zlfs-emu timing)\n",
			a->image);
		ret = -EINVAL;
	}
	if (!ret)
		ret = workload(fs, a, &user);
	if (!ret) /* everything durable: the clock stops when the last program ends */
		ret = files_sync(fs);
	if (!ret)
		ret = zemu_dev_stats(fs->dev, &st);
	if (!ret) {
		wbuf_stats(fs->wb, &ws);
		print_csv(a, &mo.wb, user, &st, &ws);
	} else {
		fprintf(stderr, "zlfs-bench-buffers: workload failed: %s\n", strerror(-ret));
	}
	return files_unmount(fs) ? -EIO : ret;
}

int main(int argc, char **argv)
{
	struct bench_args a = {.streams = 4, .file_size = 32u << 20, .chunk = 64u << 10,
			       .fsync_every = 8u << 20, .small_every = 16};

	zlog_set_ident("zlfs-bench-buffers");
	if (parse_args(argc, argv, &a)) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (a.header_only) {
		printf("%s\n", csv_header);
		return 0;
	}
	return run(&a) ? 1 : 0;
}
