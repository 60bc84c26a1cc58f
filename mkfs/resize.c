/*
 * resize.c - resize.zlfs: grow a zlfs filesystem onto more zones of its device, offline.
 *
 * Owns: the command line (in the style of resize.f2fs and resize2fs), the target size in
 * zones, and the report of what was done or why not.
 * May call: super.h (zlfs_resize), zdev.h, log.h.
 * Exit status: 0 grown (or already that size), 1 refused or failed (a reason was printed),
 * 2 usage error.
 */
#include "log.h"
#include "super.h"
#include "zdev.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: resize.zlfs [options] DEVICE\n"
		"Grow the zlfs filesystem on DEVICE onto more of the device's zones, offline: the\n"
		"filesystem must be unmounted, and cleanly (mount and unmount it, or fsck.zlfs -p).\n"
		"A power cut at any point leaves the old size or the new one.\n\n"
		"  -z, --zones N            span N zones of the device (default: all of them)\n"
		"  -s, --size SIZE          span SIZE bytes (K, M, G, T suffixes), whole zones\n"
		"  -n, --dry-run            say what would be done, write nothing\n"
		"      --wait SECS          DEVICE held by a zlfs daemon finishing its unmount:\n"
		"                           wait up to SECS for it (default %u; 0: fail at once)\n"
		"  -q, --quiet              print nothing but errors\n"
		"  -V, --version            print the version and exit\n"
		"  -h, --help               print this help and exit\n",
		ZDEV_WAIT_DEFAULT);
}

struct resize_args {
	struct zlfs_resize_opts o;
	uint64_t size;
	unsigned wait_secs;
	int quiet;
	const char *path;
};

static int parse_u64(const char *s, uint64_t *out, int suffixes)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	if (suffixes && *end) {
		const char *u = strchr("KMGT", *end);

		if (!u || end[1])
			return -1;
		shift = 10 * (int)(u - "KMGT" + 1);
		end++;
	}
	if (*end || (shift && v > (~0ULL >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* 0 to go on, -1 to exit successfully (help, version), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct resize_args *a)
{
	static const struct option longopts[] = {
		{"zones", required_argument, NULL, 'z'}, {"size", required_argument, NULL, 's'},
		{"dry-run", no_argument, NULL, 'n'},	 {"wait", required_argument, NULL, 'w'},
		{"quiet", no_argument, NULL, 'q'},	 {"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},	 {NULL, 0, NULL, 0}};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "z:s:nqVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'z':
			if (parse_u64(optarg, &v, 0) || !v || v > UINT32_MAX) {
				fprintf(stderr, "resize.zlfs: --zones takes a zone count\n");
				return 2;
			}
			a->o.nr_zones = (uint32_t)v;
			break;
		case 's':
			if (parse_u64(optarg, &a->size, 1) || !a->size) {
				fprintf(stderr, "resize.zlfs: --size takes bytes, with K, M, G or T\n");
				return 2;
			}
			break;
		case 'n': a->o.dry_run = 1; break;
		case 'w':
			if (parse_u64(optarg, &v, 0) || v > 86400) {
				fprintf(stderr, "resize.zlfs: --wait takes seconds, 0 to 86400\n");
				return 2;
			}
			a->wait_secs = (unsigned)v;
			break;
		case 'q': a->quiet = 1; break;
		case 'V': printf("resize.zlfs %s (format revision %d)\n", ZLFS_VERSION, ZLFS_REVISION); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc || (a->size && a->o.nr_zones)) {
		if (a->size && a->o.nr_zones)
			fprintf(stderr, "resize.zlfs: give --zones or --size, not both\n");
		usage(stderr);
		return 2;
	}
	a->path = argv[optind];
	return 0;
}

static void report(const struct resize_args *a, const struct zdev_geometry *g,
		   const struct zlfs_resize_result *r)
{
	uint64_t mib = g->zone_size >> 20;

	if (a->quiet)
		return;
	if (r->new_zones == r->old_zones) {
		printf("%s: the filesystem already spans %u zones: nothing to do\n", a->path,
		       r->old_zones);
		return;
	}
	printf("%s: %s %u zones (%u in the main area, %llu MiB) %s %u zones (%u, %llu MiB)\n",
	       a->path, a->o.dry_run ? "would grow from" : "grown from", r->old_zones, r->old_main,
	       (unsigned long long)(r->old_zones * mib), a->o.dry_run ? "to" : "to", r->new_zones,
	       r->new_main, (unsigned long long)(r->new_zones * mib));
}

int main(int argc, char **argv)
{
	struct resize_args a = {.wait_secs = ZDEV_WAIT_DEFAULT};
	struct zlfs_resize_result r;
	struct zdev_open_opts oo;
	struct zdev *dev;
	int ret;

	zlog_set_ident("resize.zlfs");
	ret = parse_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? 0 : ret;
	oo = (struct zdev_open_opts){.readonly = a.o.dry_run, .wait_secs = a.wait_secs};
	if (zdev_open(a.path, &oo, &dev))
		return 1; /* zdev_open said why */
	if (a.size) {
		a.o.nr_zones = (uint32_t)(a.size / zdev_geometry(dev)->zone_size);
		if (!a.o.nr_zones) {
			fprintf(stderr, "resize.zlfs: --size is less than a zone\n");
			zdev_close(dev);
			return 2;
		}
	}
	ret = zlfs_resize(dev, &a.o, &r);
	if (!ret)
		report(&a, zdev_geometry(dev), &r);
	else if (ret == -EFBIG && r.largest > r.old_zones)
		fprintf(stderr, "resize.zlfs: %s: %u zones do not fit: %s; it can grow to %u "
				"zones (resize.zlfs --zones %u)\n",
			a.path, r.new_zones, r.why, r.largest, r.largest);
	else if (ret == -EFBIG)
		fprintf(stderr, "resize.zlfs: %s: cannot grow at all: %s (the metadata area mkfs "
				"sized holds no more; make the filesystem anew to use the device)\n",
			a.path, r.why);
	else
		fprintf(stderr, "resize.zlfs: %s: %s\n", a.path, r.why[0] ? r.why : strerror(-ret));
	zdev_close(dev);
	return ret ? 1 : 0;
}
