/*
 * zlfs-emu.c - the zlfs-emu command: create, inspect and crash-test emulator images.
 *
 * Owns: command-line parsing, size suffixes, and the human/JSON output of each subcommand.
 * May call: zdev_emu.h and zdev.h (public API only), log.h, nbd_server.h (serve-nbd).
 * Exit status: 0 success, 1 failure (a reason was printed), 2 usage error.
 */
#include "nbd_server.h"
#include "zdev_emu.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2

static const char usage_text[] =
	"usage: zlfs-emu COMMAND [ARGS]\n"
	"\n"
	"  create IMAGE --size SIZE --zone-size SIZE [--zone-capacity SIZE]\n"
	"         [--block-size 512|4096] [--conventional N] [--max-open N] [--max-active N]\n"
	"         [--journal-slots N] [--log FILE] [--timing SPEC]\n"
	"      Create (or overwrite) an emulated host-managed zoned device image.\n"
	"  create IMAGE --mode conventional --size SIZE [--ftl SPEC] [--timing SPEC]\n"
	"         [--zone-size SIZE] [--journal-slots N] [--log FILE]\n"
	"      Create a conventional device: a page-mapped FTL on the NAND model (default\n"
	"      ufs40). SPEC: op=7% (over-provisioning, the default), cache=SIZE (map cache,\n"
	"      default 1/128 of the map). --zone-size only sets the image's layout (64M).\n"
	"  timing IMAGE [SPEC]\n"
	"      Print the image's timing model, or set it to SPEC (the image must not be open).\n"
	"      SPEC: off (the default), ufs40 (4 dies, 192K units, 285us programs, 4600 MB/s\n"
	"      link, 50us reads, 3ms erases of 16M blocks), or overrides of ufs40 such as\n"
	"      dies=8,unit=96K,prog=560us,link=2300,read=60us,erase=5ms,block=8M.\n"
	"      Time is simulated; see docs/emulator.md.\n"
	"  report IMAGE [--json]\n"
	"      Print the geometry and every zone: index, start, len, capacity, wp, type, cond.\n"
	"  serve-nbd IMAGE SOCKET [--stats FILE] [--once] [--read-only] [--direct]\n"
	"      Serve IMAGE as a block device over the NBD protocol on the Unix socket SOCKET\n"
	"      (newstyle; flush, FUA and trim honoured), until SIGTERM or SIGINT. --stats\n"
	"      rewrites FILE with the device's statistics (JSON) at every flush and at exit;\n"
	"      --once exits when the first client disconnects; --direct: O_DIRECT on IMAGE.\n"
	"  inject IMAGE {offline|readonly|eio-read|eio-write} TARGET [--offset]\n"
	"      Inject a fault. TARGET is a zone index when it is a bare number (\"7\"), a byte\n"
	"      offset when it has a size suffix (\"28K\", \"1M\") or when --offset is given.\n"
	"      offline/readonly act on the target's zone; eio-* fire once, on the next read\n"
	"      (write) touching the target offset (a zone index means the zone's start).\n"
	"  powercut IMAGE [--keep-prefix N | --seed S] [--torn]\n"
	"      Simulate power loss: drop the unflushed writes (all by default, all but the\n"
	"      first N, or a number drawn from seed S); --torn keeps a leading part of the\n"
	"      first dropped write.\n"
	"  replay IMAGE LOG N OUT [--torn]\n"
	"      Write OUT: the image as the log started, plus the first N logged operations,\n"
	"      all durable; --torn keeps only half the blocks of operation N if it is a write.\n"
	"  grow IMAGE --size SIZE\n"
	"      Make a zoned image larger (a namespace or partition grown): empty zones of\n"
	"      its zone size and capacity after its own; then resize.zlfs grows zlfs onto\n"
	"      them. The image must not be open; one with a write log does not grow.\n"
	"  log-count LOG\n"
	"      Print the number of operations in a write log.\n"
	"\n"
	"SIZE is bytes with an optional K, M, G or T suffix (powers of 1024).\n"
	"  --help       show this help\n"
	"  --version    show the version\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "zlfs-emu: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'zlfs-emu --help'.\n");
	return EXIT_USAGE;
}

/* Parse digits with an optional K/M/G/T suffix; *HAS_SUFFIX tells whether one was used. */
static int parse_size_ex(const char *s, uint64_t *out, int *has_suffix)
{
	static const char units[] = "KMGT";
	uint64_t v = 0;
	const char *p = s, *u;

	if (!*p)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return -EINVAL;
	*has_suffix = 0;
	if (*p) {
		u = strchr(units, *p >= 'a' ? *p - 'a' + 'A' : *p);
		if (!u || p[1])
			return -EINVAL;
		for (long i = 0; i <= u - units; i++) {
			if (v > UINT64_MAX / 1024)
				return -ERANGE;
			v *= 1024;
		}
		*has_suffix = 1;
	}
	*out = v;
	return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
	int suffix;

	return parse_size_ex(s, out, &suffix);
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	int suffix;

	if (parse_size_ex(s, &v, &suffix) || suffix || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "zlfs-emu: %s: %s\n", what, strerror(-err));
	return EXIT_FAILURE;
}

/* ---- create ---------------------------------------------------------------------------- */

static int cmd_create(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"size", required_argument, NULL, 's'},
		{"zone-size", required_argument, NULL, 'z'},
		{"zone-capacity", required_argument, NULL, 'c'},
		{"block-size", required_argument, NULL, 'b'},
		{"conventional", required_argument, NULL, 'n'},
		{"max-open", required_argument, NULL, 'o'},
		{"max-active", required_argument, NULL, 'a'},
		{"journal-slots", required_argument, NULL, 'j'},
		{"log", required_argument, NULL, 'l'},
		{"timing", required_argument, NULL, 't'},
		{"mode", required_argument, NULL, 'm'},
		{"ftl", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	struct zemu_create_opts o = {0};
	int has_ftl = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 's': bad = parse_size(optarg, &o.size); break;
		case 'z': bad = parse_size(optarg, &o.zone_size); break;
		case 'c': bad = parse_size(optarg, &o.zone_capacity); break;
		case 'b': bad = parse_u32(optarg, &o.lblock_size); break;
		case 'n': bad = parse_u32(optarg, &o.nr_conv); break;
		case 'o': bad = parse_u32(optarg, &o.max_open); break;
		case 'a': bad = parse_u32(optarg, &o.max_active); break;
		case 'j': bad = parse_u32(optarg, &o.journal_slots); break;
		case 'l': o.log_path = optarg; break;
		case 't':
			if (zemu_timing_parse(optarg, &o.timing))
				return usage_error("create: bad timing model '%s'", optarg);
			break;
		case 'm':
			if (strcmp(optarg, "zoned") && strcmp(optarg, "conventional"))
				return usage_error("create: --mode is zoned or conventional, not '%s'",
						   optarg);
			o.mode = strcmp(optarg, "zoned") ? ZEMU_MODE_FTL : ZEMU_MODE_ZONED;
			break;
		case 'f':
			if (zemu_ftl_parse(optarg, &o.ftl))
				return usage_error("create: bad FTL options '%s'", optarg);
			has_ftl = 1;
			break;
		default: return usage_error("create: bad option%s", "");
		}
		if (bad)
			return usage_error("create: bad number '%s'", optarg);
	}
	if (argc - optind != 1)
		return usage_error("create: expected one IMAGE argument%s", "");
	if (has_ftl && o.mode != ZEMU_MODE_FTL)
		return usage_error("create: --ftl needs --mode conventional%s", "");
	if (o.mode == ZEMU_MODE_FTL && !o.zone_size)
		o.zone_size = o.size < (64 << 20) ? o.size : 64 << 20;
	if (!o.size || !o.zone_size)
		return usage_error("create: --size and --zone-size are required%s", "");
	ret = zemu_create(argv[optind], &o);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- timing ---------------------------------------------------------------------------- */

static void print_timing(const struct zemu_timing *t, int json)
{
	if (json && !t->dies)
		printf("null");
	else if (json)
		printf("{\"dies\": %u, \"prog_unit\": %u, \"prog_ns\": %u, \"link_mbs\": %u, "
		       "\"read_ns\": %u, \"erase_ns\": %u, \"block\": %u, \"zone_dies\": %u}",
		       t->dies, t->prog_unit, t->prog_ns, t->link_mbs, t->read_ns, t->erase_ns,
		       t->block, t->zone_dies ? t->zone_dies : t->dies);
	else if (!t->dies)
		printf("off");
	else
		printf("dies=%u,unit=%uK,prog=%uns,link=%u,read=%uns,erase=%uns,block=%uK,zone_dies=%u",
		       t->dies, t->prog_unit >> 10, t->prog_ns, t->link_mbs, t->read_ns, t->erase_ns,
		       (t->block ? t->block : 16u << 20) >> 10, t->zone_dies ? t->zone_dies : t->dies);
}

static int cmd_timing(int argc, char **argv)
{
	struct zemu_timing t;
	struct zdev_open_opts oo = {.readonly = 1};
	struct zemu_stats st;
	struct zdev *dev;
	int ret;

	if (argc < 2 || argc > 3 || argv[1][0] == '-')
		return usage_error("timing: expected IMAGE [SPEC]%s", "");
	if (argc == 3) {
		if (zemu_timing_parse(argv[2], &t))
			return usage_error("timing: bad timing model '%s'", argv[2]);
		ret = zemu_set_timing(argv[1], &t);
		return ret ? fail(argv[1], ret) : EXIT_SUCCESS;
	}
	ret = zemu_open(argv[1], &oo, &dev);
	if (ret)
		return fail(argv[1], ret);
	ret = zemu_dev_stats(dev, &st);
	zdev_close(dev);
	if (ret)
		return fail(argv[1], ret);
	print_timing(&st.timing, 0);
	putchar('\n');
	return EXIT_SUCCESS;
}

/* ---- grow ------------------------------------------------------------------------------ */

static int cmd_grow(int argc, char **argv)
{
	uint64_t size = 0;
	int ret;

	if (argc != 4 || argv[1][0] == '-' || strcmp(argv[2], "--size") || parse_size(argv[3], &size))
		return usage_error("grow: expected IMAGE --size SIZE%s", "");
	ret = zemu_grow(argv[1], size);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- report ---------------------------------------------------------------------------- */

static void print_wp(FILE *f, uint64_t wp, int json)
{
	if (wp == UINT64_MAX)
		fprintf(f, json ? "null" : "%12s", "-");
	else
		fprintf(f, json ? "%" PRIu64 : "%12" PRIu64, wp);
}

static void report_text(const struct zdev_geometry *g, const struct zemu_stats *st,
			const char *path, const struct zdev_zone *zones)
{
	printf("%s: %u zones (%u conventional), zone size %" PRIu64 ", zone capacity %" PRIu64
	       ", block size %u, max open %u, max active %u, capacity %" PRIu64
	       ", generation %" PRIu64 ", unflushed writes %ld, pending faults %d, log %s\n",
	       path, g->nr_zones, g->nr_conv, g->zone_size, g->zone_capacity, g->lblock_size,
	       g->max_open, g->max_active, g->capacity, st->generation, st->unflushed,
	       st->pending_faults, st->log_path[0] ? st->log_path : "none");
	printf("timing model: ");
	print_timing(&st->timing, 0);
	putchar('\n');
	if (st->mode == ZEMU_MODE_FTL)
		printf("mode: conventional (FTL): over-provisioning %.1f%% asked, %" PRIu64
		       " MiB real, %u superblocks of %u pages, %u free, %" PRIu64 " pages mapped, "
		       "map cache %" PRIu64 " of %" PRIu64 " map pages\n", st->ftl.op_permille / 10.0,
		       st->ftl_op_bytes >> 20,
		       st->ftl_superblocks, st->ftl_pages_per_superblock, st->ftl_free_superblocks,
		       st->ftl_mapped_pages, st->map_cache_pages, st->map_pages);
	else
		printf("mode: zoned\n");
	printf("%6s %12s %12s %12s %12s  %-20s %s\n", "zone", "start", "len", "capacity", "wp",
	       "type", "cond");
	for (uint32_t i = 0; i < g->nr_zones; i++) {
		const struct zdev_zone *z = &zones[i];
		printf("%6u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " ", i, z->start, z->len,
		       z->capacity);
		print_wp(stdout, z->wp, 0);
		printf("  %-20s %s\n", zdev_type_name(z->type), zdev_cond_name(z->cond));
	}
}

static void json_string(const char *str)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void report_json(const struct zdev_geometry *g, const struct zemu_stats *st,
			const char *path, const struct zdev_zone *zones)
{
	char line[4096];

	printf("{\"image\": ");
	json_string(path);
	printf(", \"nr_zones\": %u, \"nr_conv\": %u, \"zone_size\": %" PRIu64
	       ", \"zone_capacity\": %" PRIu64 ", \"block_size\": %u, \"max_open\": %u"
	       ", \"max_active\": %u, \"capacity\": %" PRIu64 ", \"generation\": %" PRIu64
	       ", \"unflushed\": %ld, \"pending_faults\": %d, \"timing\": ",
	       g->nr_zones, g->nr_conv, g->zone_size, g->zone_capacity, g->lblock_size,
	       g->max_open, g->max_active, g->capacity, st->generation, st->unflushed,
	       st->pending_faults);
	print_timing(&st->timing, 1);
	if (zemu_stats_json(st, line, sizeof(line)) > 0)
		printf(", \"mode\": \"%s\", \"device\": %s",
		       st->mode == ZEMU_MODE_FTL ? "conventional" : "zoned", line);
	printf(",\n \"zones\": [");
	for (uint32_t i = 0; i < g->nr_zones; i++) {
		const struct zdev_zone *z = &zones[i];
		printf("%s\n  {\"zone\": %u, \"start\": %" PRIu64 ", \"len\": %" PRIu64
		       ", \"capacity\": %" PRIu64 ", \"wp\": ", i ? "," : "", i, z->start, z->len,
		       z->capacity);
		print_wp(stdout, z->wp, 1);
		printf(", \"type\": \"%s\", \"cond\": \"%s\"}", zdev_type_name(z->type),
		       zdev_cond_name(z->cond));
	}
	printf("\n]}\n");
}

static int cmd_report(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	struct zdev_open_opts oo = {.readonly = 1};
	const struct zdev_geometry *g;
	struct zdev_zone *zones;
	struct zemu_stats st;
	struct zdev *dev;
	int c, json = 0, ret;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		if (c != 'j')
			return usage_error("report: bad option%s", "");
		json = 1;
	}
	if (argc - optind != 1)
		return usage_error("report: expected one IMAGE argument%s", "");
	ret = zemu_open(argv[optind], &oo, &dev);
	if (ret)
		return EXIT_FAILURE;
	g = zdev_geometry(dev);
	zones = calloc(g->nr_zones, sizeof(*zones));
	ret = zones ? zdev_report(dev, 0, g->nr_zones, zones) : -ENOMEM;
	if (!ret)
		ret = zemu_dev_stats(dev, &st);
	if (!ret && json)
		report_json(g, &st, argv[optind], zones);
	else if (!ret)
		report_text(g, &st, argv[optind], zones);
	free(zones);
	zdev_close(dev);
	return ret ? fail(argv[optind], ret) : EXIT_SUCCESS;
}

/* ---- inject ---------------------------------------------------------------------------- */

static int parse_fault(const char *s, enum zemu_fault *f)
{
	static const enum zemu_fault all[] = {ZEMU_FAULT_OFFLINE, ZEMU_FAULT_READONLY,
					      ZEMU_FAULT_EIO_READ, ZEMU_FAULT_EIO_WRITE};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (!strcmp(s, zemu_fault_name(all[i]))) {
			*f = all[i];
			return 0;
		}
	}
	return -EINVAL;
}

static int cmd_inject(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"offset", no_argument, NULL, 'o'},
		{NULL, 0, NULL, 0},
	};
	struct zdev_geometry g;
	enum zemu_fault fault;
	uint64_t v, off;
	int c, as_offset = 0, suffix, ret;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		if (c != 'o')
			return usage_error("inject: bad option%s", "");
		as_offset = 1;
	}
	if (argc - optind != 3)
		return usage_error("inject: expected IMAGE FAULT TARGET%s", "");
	if (parse_fault(argv[optind + 1], &fault))
		return usage_error("inject: unknown fault '%s' (offline, readonly, eio-read, eio-write)",
				   argv[optind + 1]);
	if (parse_size_ex(argv[optind + 2], &v, &suffix))
		return usage_error("inject: bad target '%s'", argv[optind + 2]);
	ret = zemu_read_geometry(argv[optind], &g);
	if (ret)
		return EXIT_FAILURE;
	if (as_offset || suffix) {
		off = v;
	} else {
		if (v >= g.nr_zones) {
			fprintf(stderr, "zlfs-emu: %s: zone %" PRIu64 " does not exist (%u zones)\n",
				argv[optind], v, g.nr_zones);
			return EXIT_FAILURE;
		}
		off = v * g.zone_size;
	}
	if (off >= g.capacity) {
		fprintf(stderr, "zlfs-emu: %s: offset %" PRIu64 " is past the end (%" PRIu64 ")\n",
			argv[optind], off, g.capacity);
		return EXIT_FAILURE;
	}
	ret = zemu_inject(argv[optind], fault, off);
	if (ret)
		return fail(argv[optind], ret);
	printf("%s: %s injected at offset %" PRIu64 " (zone %" PRIu64 ")\n", argv[optind],
	       zemu_fault_name(fault), off, off / g.zone_size);
	return EXIT_SUCCESS;
}

/* ---- powercut -------------------------------------------------------------------------- */

static int cmd_powercut(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"keep-prefix", required_argument, NULL, 'k'},
		{"seed", required_argument, NULL, 's'},
		{"torn", no_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	struct zemu_powercut_result res;
	uint64_t keep = 0, seed = 0;
	int c, torn = 0, has_keep = 0, has_seed = 0, ret;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		int bad = 0, suffix;
		switch (c) {
		case 'k': bad = parse_size_ex(optarg, &keep, &suffix) || suffix || keep > LONG_MAX;
			  has_keep = 1; break;
		case 's': bad = parse_size_ex(optarg, &seed, &suffix) || suffix || !seed;
			  has_seed = 1; break;
		case 't': torn = 1; break;
		default: return usage_error("powercut: bad option%s", "");
		}
		if (bad)
			return usage_error("powercut: bad number '%s' (seeds are nonzero)", optarg);
	}
	if (argc - optind != 1)
		return usage_error("powercut: expected one IMAGE argument%s", "");
	if (has_keep && has_seed)
		return usage_error("powercut: --keep-prefix and --seed exclude each other%s", "");
	ret = zemu_powercut_ex(argv[optind], has_keep ? (long)keep : -1, seed, torn, &res);
	if (ret)
		return fail(argv[optind], ret);
	printf("%s: power cut: kept %ld of %ld unflushed writes, dropped %ld", argv[optind],
	       res.kept, res.unflushed, res.dropped);
	if (res.torn)
		printf(" (the first dropped write torn: %" PRIu64 " of %" PRIu64 " bytes kept)",
		       res.torn_bytes, res.torn_len);
	printf("\n");
	return EXIT_SUCCESS;
}

/* ---- serve-nbd ------------------------------------------------------------------------- */

static int cmd_serve_nbd(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"stats", required_argument, NULL, 's'},
		{"once", no_argument, NULL, 'o'},
		{"read-only", no_argument, NULL, 'r'},
		{"direct", no_argument, NULL, 'd'},
		{NULL, 0, NULL, 0},
	};
	struct nbd_server_opts o = {0};
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 's': o.stats_path = optarg; break;
		case 'o': o.once = 1; break;
		case 'r': o.readonly = 1; break;
		case 'd': o.direct = 1; break;
		default: return usage_error("serve-nbd: bad option%s", "");
		}
	}
	if (argc - optind != 2)
		return usage_error("serve-nbd: expected IMAGE SOCKET%s", "");
	ret = nbd_serve(argv[optind], argv[optind + 1], &o);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- replay, log-count ----------------------------------------------------------------- */

static int cmd_replay(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"torn", no_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	uint64_t n;
	int c, torn = 0, suffix, ret;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		if (c != 't')
			return usage_error("replay: bad option%s", "");
		torn = 1;
	}
	if (argc - optind != 4)
		return usage_error("replay: expected IMAGE LOG N OUT%s", "");
	if (parse_size_ex(argv[optind + 2], &n, &suffix) || suffix || n > LONG_MAX)
		return usage_error("replay: bad operation count '%s'", argv[optind + 2]);
	ret = zemu_replay(argv[optind], argv[optind + 1], (long)n, argv[optind + 3], torn);
	if (ret)
		return fail(argv[optind + 3], ret);
	printf("%s: base + %" PRIu64 " operations of %s%s\n", argv[optind + 3], n, argv[optind + 1],
	       torn ? " (last one torn)" : "");
	return EXIT_SUCCESS;
}

static int cmd_log_count(int argc, char **argv)
{
	long n;

	if (argc != 2 || argv[1][0] == '-')
		return usage_error("log-count: expected one LOG argument%s", "");
	n = zemu_log_count(argv[1]);
	if (n < 0)
		return fail(argv[1], (int)n);
	printf("%ld\n", n);
	return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{"create", cmd_create}, {"report", cmd_report}, {"inject", cmd_inject},
		{"powercut", cmd_powercut}, {"replay", cmd_replay}, {"log-count", cmd_log_count},
		{"timing", cmd_timing}, {"serve-nbd", cmd_serve_nbd}, {"grow", cmd_grow},
	};

	zlog_set_ident("zlfs-emu");
	if (argc < 2)
		return usage_error("missing command%s", "");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(usage_text, stdout);
		return EXIT_SUCCESS;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("zlfs-emu %s\n", ZLFS_VERSION);
		return EXIT_SUCCESS;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (!strcmp(argv[1], cmds[i].name)) {
			for (int a = 2; a < argc; a++) {
				if (!strcmp(argv[a], "--help")) {
					fputs(usage_text, stdout);
					return EXIT_SUCCESS;
				}
			}
			return cmds[i].fn(argc - 1, argv + 1);
		}
	}
	return usage_error("unknown command '%s'", argv[1]);
}
