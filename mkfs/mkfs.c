/*
 * mkfs.c - mkfs.zlfs: make a zlfs filesystem on a zoned block device or an emulated image.
 *
 * Owns: the command line (options in the style of mkfs.f2fs and mke2fs), refusing to
 * overwrite a filesystem without -f, and the summary printed after formatting.
 * May call: super.h (zlfs_mkfs, zlfs_sb_read, zlfs_foreign_fs), zdev.h, log.h.
 */
#include "log.h"
#include "super.h"
#include "zdev.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: mkfs.zlfs [options] DEVICE\n"
		"Make a zlfs filesystem on a zoned block device or a zlfs-emu image.\n\n"
		"  -l, -L, --label LABEL    volume label (up to %d bytes)\n"
		"  -o, --overprovision PCT  zones held back for garbage collection, in percent\n"
		"                           of the main area (default %d)\n"
		"      --logs 2|4|6         active logs (default: the most the zone limits allow)\n"
		"  -f, --force              overwrite an existing filesystem\n"
		"  -q, --quiet              print nothing but errors\n"
		"  -V, --version            print the version and exit\n"
		"  -h, --help               print this help and exit\n",
		ZLFS_LABEL_MAX, ZLFS_DEFAULT_OVP);
}

struct mkfs_args {
	struct zlfs_mkfs_opts o;
	int force;
	const char *path;
};

static int parse_uint(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > 1000000)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* 0 to go on, -1 to exit successfully (help, version), 1 on a usage error: mkfs(8) exits
 * 0 on success and 1 on any failure. */
static int parse_args(int argc, char **argv, struct mkfs_args *a)
{
	static const struct option longopts[] = {
		{"label", required_argument, NULL, 'l'}, {"overprovision", required_argument, NULL, 'o'},
		{"logs", required_argument, NULL, 'g'},  {"force", no_argument, NULL, 'f'},
		{"quiet", no_argument, NULL, 'q'},	 {"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},	 {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "l:L:o:fqVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
		case 'L':
			if (strlen(optarg) > ZLFS_LABEL_MAX) {
				fprintf(stderr, "mkfs.zlfs: label longer than %d bytes\n", ZLFS_LABEL_MAX);
				return 1;
			}
			a->o.label = optarg;
			break;
		case 'o':
			if (parse_uint(optarg, &a->o.ovp_percent) || !a->o.ovp_percent) {
				fprintf(stderr, "mkfs.zlfs: -o takes a percentage from 1 to 49\n");
				return 1;
			}
			break;
		case 'g':
			if (parse_uint(optarg, &a->o.nr_logs) || !a->o.nr_logs) {
				fprintf(stderr, "mkfs.zlfs: --logs takes 2, 4 or 6\n");
				return 1;
			}
			break;
		case 'f': a->force = 1; break;
		case 'q': a->o.quiet = 1; break;
		case 'V': printf("mkfs.zlfs %s (format revision %d)\n", ZLFS_VERSION, ZLFS_REVISION); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return 1;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 1;
	}
	a->path = argv[optind];
	return 0;
}

static void progress(uint32_t done, uint32_t total, void *arg)
{
	(void)arg;
	fprintf(stderr, "\rresetting zones: %u/%u", done, total);
	if (done == total)
		fputc('\n', stderr);
}

/* Refuse to overwrite what is already there unless forced. */
static int check_existing(struct zdev *dev, const char *path, int force)
{
	struct zlfs_sb_info old;
	const char *other;

	if (force)
		return 0;
	if (!zlfs_sb_read(dev, &old, NULL)) {
		fprintf(stderr,
			"mkfs.zlfs: %s already holds a zlfs filesystem (label \"%s\"); "
			"use -f to overwrite it\n",
			path, old.label);
		return -EEXIST;
	}
	other = zlfs_foreign_fs(dev);
	if (other) {
		fprintf(stderr, "mkfs.zlfs: %s appears to hold a %s filesystem; use -f to overwrite it\n",
			path, other);
		return -EEXIST;
	}
	return 0;
}

static void print_uuid(const uint8_t u[16], char *out)
{
	static const int dash[16] = {[4] = 1, [6] = 1, [8] = 1, [10] = 1};
	int i;

	for (i = 0; i < 16; i++)
		out += sprintf(out, "%s%02x", dash[i] ? "-" : "", u[i]);
}

static void print_summary(struct zdev *dev, const struct zlfs_sb_info *s)
{
	const struct zdev_info *info = zdev_info(dev);
	uint64_t seg_bytes = (uint64_t)s->seg_blocks * ZLFS_BLOCK_SIZE;
	uint64_t usable = (uint64_t)(s->main_zones - s->reserved_zones) * s->segs_per_zone *
			  (s->seg_blocks - 1) * ZLFS_BLOCK_SIZE;
	char uuid[40];

	print_uuid(s->uuid, uuid);
	if (info->kind == ZDEV_KIND_EMU)
		printf("device     %s (zlfs-emu image)\n", info->path);
	else
		printf("device     %s (zoned block device%s%s)\n", info->path,
		       info->model[0] ? ", " : "", info->model);
	printf("geometry   %u zones of %llu KiB, capacity %llu KiB, %u conventional, "
	       "logical block %u, max open %u, max active %u (0 = no limit)\n",
	       s->nr_zones, (unsigned long long)(s->zone_size >> 10),
	       (unsigned long long)(s->zone_capacity >> 10), s->nr_conv, s->dev_lblock_size,
	       s->max_open, s->max_active);
	printf("layout     superblock zones %u-%u, checkpoint zones %u-%u, metadata zones %u-%u, "
	       "main zones %u-%u\n",
	       s->sb_zone[0], s->sb_zone[1], s->cp_zone[0], s->cp_zone[1], s->meta_zone_first,
	       s->meta_zone_first + s->meta_zones - 1, s->main_zone_first,
	       s->main_zone_first + s->main_zones - 1);
	printf("segments   %llu KiB, %u per zone; %u active logs; GC reserve %u zones (%u%%)\n",
	       (unsigned long long)(seg_bytes >> 10), s->segs_per_zone, s->nr_logs,
	       s->reserved_zones, s->ovp_percent);
	printf("nodes      %u node ids (NAT %u blocks), SIT %u blocks\n", s->max_nid, s->nat_blocks,
	       s->sit_blocks);
	printf("usable     %llu MiB\n", (unsigned long long)(usable >> 20));
	printf("uuid       %s\nlabel      %s\n", uuid, s->label);
}

int main(int argc, char **argv)
{
	struct mkfs_args a = {0};
	struct zlfs_sb_info sbi;
	struct zdev *dev;
	int ret;

	zlog_set_ident("mkfs.zlfs");
	ret = parse_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = zdev_open(a.path, NULL, &dev);
	if (ret)
		return 1;
	ret = check_existing(dev, a.path, a.force);
	if (!ret) {
		if (!a.o.quiet && isatty(STDERR_FILENO) && zdev_geometry(dev)->nr_zones > 1024)
			a.o.progress = progress;
		ret = zlfs_mkfs(dev, &a.o, &sbi);
	}
	if (!ret && !a.o.quiet)
		print_summary(dev, &sbi);
	zdev_close(dev);
	return ret ? 1 : 0;
}
