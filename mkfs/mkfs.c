/*
 * mkfs.c - mkfs.zlfs: make a zlfs filesystem on a zoned block device or an emulated image.
 *
 * Owns: the command line (options in the style of mkfs.f2fs and mke2fs), refusing to
 * overwrite a filesystem without -f, reproducible images (--timestamp, --uuid), filling the
 * new filesystem from a directory (--root-dir, through sload.c) and the summary printed
 * after formatting.
 * May call: super.h (zlfs_mkfs, zlfs_sb_read, zlfs_foreign_fs, the clock pin), files.h
 * (files_mount, files_unmount), sload.h, zdev.h, crypto/zcrypt.h, log.h.
 */
#include "cluster.h"
#include "files.h"
#include "log.h"
#include "sload.h"
#include "super.h"
#include "zcrypt.h"
#include "zdev.h"

#include <ctype.h>
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
		"      --logs 2|4|6|7|10    active logs (default: the most the zone limits allow; 7\n"
		"                           below 64 main-area zones, 4 below 32)\n"
		"      --compress[=ALG]     enable compressed files (docs/compression.md); ALG,\n"
		"                           lz4 or zstd[:LEVEL], is what new regular files get\n"
		"                           when a mount names no compress= (default: none)\n"
		"        --cluster-blocks N blocks of a compressed file's cluster: 4, 8, 16, 32\n"
		"                           or 64 (default 4, 16 KiB)\n"
		"      --no-packed-inodes   give every inode a block of its own (by default the\n"
		"                           inodes of small files are stored up to 15 to a block:\n"
		"                           docs/design.md, \"Packed inodes\"; zlfs before 2026-12\n"
		"                           mounts only images made without them)\n"
		"      --encrypt            enable per-file encryption, with the master key from:\n"
		"        --keyfile FILE     a 64-byte key file (zlfs-ctl genkey FILE), or\n"
		"        --passphrase       a passphrase asked on the terminal (twice), or\n"
		"        --passphrase-fd N  a passphrase read from file descriptor N\n"
		"        --scrypt-n N       scrypt cost for the passphrase (power of two,\n"
		"                           default %llu)\n"
		"        --plain-root       leave the root directory unencrypted (by default it\n"
		"                           is encrypted and everything below inherits it)\n"
		"  -d, --root-dir DIR       fill the new filesystem with DIR's tree: owners, modes,\n"
		"                           times, xattrs, hard links, symlinks, device nodes\n"
		"  -T, --timestamp SECS     a reproducible image: every time stamped is SECS since\n"
		"                           the epoch (inode times too), and the UUID, nonces and\n"
		"                           generations derive from it and the label (or --uuid)\n"
		"  -U, --uuid UUID          the filesystem's UUID instead of a random one\n"
		"  -f, --force              overwrite an existing filesystem\n"
		"      --wait SECS          DEVICE held by a zlfs daemon finishing its unmount:\n"
		"                           wait up to SECS for it (default %u; 0: fail at once)\n"
		"  -q, --quiet              print nothing but errors\n"
		"  -V, --version            print the version and exit\n"
		"  -h, --help               print this help and exit\n",
		ZLFS_LABEL_MAX, ZLFS_DEFAULT_OVP, (unsigned long long)ZCRYPT_SCRYPT_N,
		ZDEV_WAIT_DEFAULT);
}

/* Hidden, for tests of format revisions (tests/test_revisions.c): stamp the new filesystem as
 * another revision's mkfs would. --revision REV[:MIN] --features COMPAT:RO_COMPAT:INCOMPAT
 * (hex masks). Not in --help: a real user never needs an image this code did not design. */
struct mkfs_stamp {
	int set;
	unsigned rev, min_rev;
	uint32_t feat[3];
};

struct mkfs_args {
	struct zlfs_mkfs_opts o;
	struct mkfs_stamp stamp;
	int force;
	unsigned wait_secs;
	const char *path;
	int encrypt, passphrase, passphrase_fd;
	const char *keyfile;
	unsigned long long scrypt_n;
	struct zlfs_mkfs_enc enc;
	char pass[1024];   /* the passphrase, kept to mount for --root-dir; wiped at exit */
	int pass_len;
	const char *root_dir;
	int fixed_time;
	int64_t timestamp;
	int has_uuid;
	uint8_t uuid[16];
	unsigned cluster_blocks;
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

/* Seconds since the epoch, negative ones too (the format keeps times from 1678 to 2262). */
static int parse_timestamp(const char *s, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < -9200000000LL || v > 9200000000LL)
		return -1;
	*out = v;
	return 0;
}

static int parse_uuid(const char *s, uint8_t u[16])
{
	int n = 0;

	for (; *s && n < 32; s++) {
		if (*s == '-')
			continue;
		if (!isxdigit((unsigned char)*s))
			return -1;
		int v = isdigit((unsigned char)*s) ? *s - '0' : tolower((unsigned char)*s) - 'a' + 10;

		u[n / 2] = (uint8_t)(n % 2 ? u[n / 2] | v : v << 4);
		n++;
	}
	return n == 32 && !*s ? 0 : -1;
}

/* --compress[=lz4|zstd|none]: the feature, and the algorithm new files get by default (the
 * level is the mount's: the superblock keeps none). */
static int parse_compress(const char *arg, struct zlfs_mkfs_opts *o)
{
	o->compress = 1;
	o->compress_alg = !arg || !strcmp(arg, "none") ? 0
			  : !strcmp(arg, "lz4")		 ? ZLFS_CLUSTER_LZ4
			  : !strcmp(arg, "zstd")	 ? ZLFS_CLUSTER_ZSTD
							 : ZLFS_CLUSTER_ALG_MAX;
	return o->compress_alg == ZLFS_CLUSTER_ALG_MAX ? -1 : 0;
}

/* A cluster of BLOCKS blocks: its log2 into LOG, 1 if it is one a file may have. */
static int parse_cluster(unsigned blocks, unsigned *log)
{
	for (*log = ZLFS_CLUSTER_LOG_MIN; *log <= ZLFS_CLUSTER_LOG_MAX; (*log)++)
		if (blocks == 1u << *log)
			return 1;
	return 0;
}

static int parse_stamp(int opt, const char *arg, struct mkfs_stamp *st)
{
	unsigned long f[3];

	if (!st->set) {
		st->rev = ZLFS_REVISION;
		st->min_rev = ZLFS_MIN_REVISION;
	}
	st->set = 1;
	if (opt == 'R') {
		int n = sscanf(arg, "%u:%u", &st->rev, &st->min_rev);

		if (n == 1)
			st->min_rev = st->rev < ZLFS_MIN_REVISION ? st->rev : ZLFS_MIN_REVISION;
		return n < 1 || !st->rev || st->rev > 0xffff || st->min_rev > st->rev ? -1 : 0;
	}
	if (sscanf(arg, "%lx:%lx:%lx", &f[0], &f[1], &f[2]) != 3)
		return -1;
	for (int i = 0; i < 3; i++)
		st->feat[i] = (uint32_t)f[i];
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
		{"help", no_argument, NULL, 'h'},
		{"encrypt", no_argument, NULL, 'E'},	 {"keyfile", required_argument, NULL, 'K'},
		{"passphrase", no_argument, NULL, 'P'},	 {"passphrase-fd", required_argument, NULL, 'D'},
		{"scrypt-n", required_argument, NULL, 'N'}, {"revision", required_argument, NULL, 'R'},
		{"features", required_argument, NULL, 'F'}, {"plain-root", no_argument, NULL, 'p'},
		{"wait", required_argument, NULL, 'w'},	 {"root-dir", required_argument, NULL, 'd'},
		{"timestamp", required_argument, NULL, 'T'}, {"uuid", required_argument, NULL, 'U'},
		{"packed-inodes", no_argument, NULL, 'k'}, {"no-packed-inodes", no_argument, NULL, 'n'}, {"compress", optional_argument, NULL, 'C'}, {"cluster-blocks", required_argument, NULL, 'B'},
		{NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "l:L:o:d:T:U:fqVh", longopts, NULL)) != -1) {
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
				fprintf(stderr, "mkfs.zlfs: --logs takes 2, 4, 6, 7 or 10\n");
				return 1;
			}
			break;
		case 'C':
			if (parse_compress(optarg, &a->o)) {
				fprintf(stderr, "mkfs.zlfs: --compress takes lz4, zstd or none, not "
						"'%s' (a zstd level is the mount's: -o compress=zstd:LEVEL)\n",
					optarg);
				return 1;
			}
			break;
		case 'B':
			if (parse_uint(optarg, &a->cluster_blocks) || !parse_cluster(a->cluster_blocks,
									  &a->o.cluster_log)) {
				fprintf(stderr, "mkfs.zlfs: --cluster-blocks takes 4, 8, 16, 32 or 64\n");
				return 1;
			}
			break;
		case 'E': a->encrypt = 1; break;
		case 'p': a->o.plain_root = 1; break;
		case 'k': a->o.packed_inodes = 1; break;
		case 'n': a->o.packed_inodes = 0; break;
		case 'd': a->root_dir = optarg; break;
		case 'T':
			if (parse_timestamp(optarg, &a->timestamp)) {
				fprintf(stderr, "mkfs.zlfs: --timestamp takes seconds since the epoch\n");
				return 1;
			}
			a->fixed_time = 1;
			break;
		case 'U':
			if (parse_uuid(optarg, a->uuid)) {
				fprintf(stderr, "mkfs.zlfs: --uuid takes 32 hex digits, dashes allowed "
						"(01234567-89ab-cdef-0123-456789abcdef)\n");
				return 1;
			}
			a->has_uuid = 1;
			a->o.uuid = a->uuid;
			break;
		case 'K': a->keyfile = optarg; break;
		case 'P': a->passphrase = 1; break;
		case 'D':
			if (parse_uint(optarg, (unsigned *)&a->passphrase_fd)) {
				fprintf(stderr, "mkfs.zlfs: --passphrase-fd takes a file descriptor\n");
				return 1;
			}
			break;
		case 'N':
			a->scrypt_n = strtoull(optarg, NULL, 10);
			if (a->scrypt_n < 2 || (a->scrypt_n & (a->scrypt_n - 1))) {
				fprintf(stderr, "mkfs.zlfs: --scrypt-n takes a power of two\n");
				return 1;
			}
			break;
		case 'R':
		case 'F':
			if (parse_stamp(c, optarg, &a->stamp)) {
				fprintf(stderr, "mkfs.zlfs: --revision REV[:MIN], --features C:R:I (hex)\n");
				return 1;
			}
			break;
		case 'w':
			if (parse_uint(optarg, &a->wait_secs) || a->wait_secs > 86400) {
				fprintf(stderr, "mkfs.zlfs: --wait takes seconds, 0 to 86400\n");
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
	if (!a->encrypt && (a->keyfile || a->passphrase || a->passphrase_fd >= 0)) {
		fprintf(stderr, "mkfs.zlfs: a key was given without --encrypt\n");
		return 1;
	}
	if (a->cluster_blocks && !a->o.compress) {
		fprintf(stderr, "mkfs.zlfs: --cluster-blocks only means something with --compress\n");
		return 1;
	}
	if (!a->encrypt && a->o.plain_root) {
		fprintf(stderr, "mkfs.zlfs: --plain-root only means something with --encrypt\n");
		return 1;
	}
	if (a->encrypt && !!a->keyfile + !!a->passphrase + (a->passphrase_fd >= 0) != 1) {
		fprintf(stderr, "mkfs.zlfs: --encrypt needs exactly one of --keyfile FILE, "
				"--passphrase or --passphrase-fd N\n");
		return 1;
	}
	return 0;
}

/* On a terminal the passphrase is asked twice, so a typo does not lock the data away. */
static int enc_passphrase(struct mkfs_args *a, char *pass, size_t len)
{
	char again[1024];
	int n = zcrypt_passphrase_read(a->passphrase ? -1 : a->passphrase_fd,
				       "new zlfs passphrase: ", pass, len);

	if (n >= 0 && a->passphrase) {
		int m = zcrypt_passphrase_read(-1, "repeat passphrase: ", again, sizeof(again));

		if (m >= 0 && (m != n || memcmp(pass, again, (size_t)n)))
			n = -EBADMSG;
		zcrypt_wipe(again, sizeof(again));
	}
	if (n < 0)
		fprintf(stderr, "mkfs.zlfs: no passphrase: %s\n",
			n == -EBADMSG ? "the two entries differ"
			: n == -ENOTTY ? "no terminal (use --passphrase-fd N)"
			: n == -EINVAL ? "it is empty" : strerror(-n));
	return n;
}

/* Derive the master key once, to record its check value (never the key) and the scrypt
 * parameters a mount needs to derive it again. */
static int enc_setup(struct mkfs_args *a)
{
	struct zcrypt_master m;
	int ret;

	a->enc.kdf = a->keyfile ? 1 : 2;
	if (a->keyfile) {
		ret = zcrypt_keyfile_load(a->keyfile, &m);
		if (ret)
			fprintf(stderr, "mkfs.zlfs: %s: %s\n", a->keyfile,
				ret == -EINVAL ? "not a 64-byte key file (zlfs-ctl genkey FILE)"
					       : strerror(-ret));
	} else {
		a->enc.scrypt_n = a->scrypt_n ? a->scrypt_n : ZCRYPT_SCRYPT_N;
		a->enc.scrypt_r = ZCRYPT_SCRYPT_R;
		a->enc.scrypt_p = ZCRYPT_SCRYPT_P;
		int len = enc_passphrase(a, a->pass, sizeof(a->pass) - 1);

		/* from the pinned stream when the image is to be reproducible */
		ret = len < 0 ? len : zlfs_random(a->enc.salt, sizeof(a->enc.salt));
		if (!ret)
			ret = zcrypt_passphrase_derive(a->pass, (size_t)len, a->enc.salt,
						       a->enc.scrypt_n, a->enc.scrypt_r,
						       a->enc.scrypt_p, &m);
		a->pass_len = len < 0 ? 0 : len;
		a->pass[a->pass_len] = 0;
	}
	if (!ret)
		ret = zcrypt_keycheck_make(&m, a->enc.key_check);
	zcrypt_wipe(&m, sizeof(m));
	if (ret)
		return ret;
	a->o.enc = &a->enc;
	return 0;
}

/* Rewrite both superblock records with the stamp, so no record of the real revision is left. */
static int apply_stamp(struct zdev *dev, struct zlfs_sb_info *s, const struct mkfs_stamp *st)
{
	int ret, i;

	if (!st->set)
		return 0;
	if (!zlfs_nr_logs_valid(s->nr_logs, st->rev)) {
		fprintf(stderr, "mkfs.zlfs: revision %u has no layout of %u logs: add --logs 6\n",
			st->rev, s->nr_logs);
		return -EINVAL;
	}
	s->revision = (uint16_t)st->rev;
	s->min_revision = (uint16_t)st->min_rev;
	/* Added to what mkfs set that the filesystem needs (ENCRYPT); the features a mkfs of
	 * this code adds by default (ONE_FLUSH, INLINE_DATA, XATTR_NODES, DENTRY_MARK) are another writer's
	 * choice: the stamp's. */
	s->feat_incompat &= ZLFS_FEAT_INCOMPAT_ENCRYPT | ZLFS_FEAT_INCOMPAT_COMPRESS;
	s->feat_compat |= st->feat[0];
	s->feat_ro_compat |= st->feat[1];
	s->feat_incompat |= st->feat[2];
	for (i = 0, ret = 0; i < 2 && !ret; i++) { /* zone 1, then zone 0 */
		s->sb_seq++;
		ret = zlfs_sb_write(dev, s, i);
	}
	return ret;
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
	int ret;

	if (force)
		return 0;
	ret = zlfs_sb_read(dev, &old, NULL);
	if (!ret || ret == -EPROTONOSUPPORT) { /* a newer zlfs is still a zlfs */
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

static void print_summary(struct zdev *dev, const struct zlfs_sb_info *s, int plain_root)
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
	if (s->feat_incompat & ZLFS_FEAT_INCOMPAT_ENCRYPT)
		printf("encryption AES-256-XTS contents, AES-256-CBC-CTS names; key from %s; %s\n",
		       s->enc_kdf == 1 ? "a key file" : "a passphrase (scrypt)",
		       plain_root ? "root directory not encrypted (zlfs-ctl encrypt DIR)"
				  : "root directory encrypted, everything below inherits it");
}

/* FNV-1a over the bytes, folded into H. */
static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* A reproducible image: the clock stands at the timestamp, and the random bytes (UUID unless
 * given, salt, nonces, generations) come from a stream seeded by what the user gave - the
 * timestamp, the label and the UUID - so the same command on the same tree makes the same
 * image, and images that differ in label or UUID differ in everything random too. */
static void pin_clock(const struct mkfs_args *a)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	if (!a->fixed_time)
		return;
	h = fnv(h, &a->timestamp, sizeof(a->timestamp));
	if (a->o.label)
		h = fnv(h, a->o.label, strlen(a->o.label));
	if (a->has_uuid)
		h = fnv(h, a->uuid, sizeof(a->uuid));
	zlfs_pin_clock((uint64_t)(a->timestamp * 1000000000LL), h);
}

/* The new filesystem (on a closed device) gets the tree of --root-dir. */
static int load_root_dir(struct mkfs_args *a)
{
	struct zlfs_key_source ks = {.keyfile = a->keyfile, .passphrase = a->pass_len ? a->pass : NULL};
	struct zlfs_mount_opts mo = {.key = a->encrypt ? &ks : NULL, .wait_secs = a->wait_secs,
				     .wb = {.serial = a->fixed_time}};
	struct sload_opts so = {.root = a->root_dir, .fixed_time = a->fixed_time,
				.time_ns = a->timestamp * 1000000000LL};
	struct sload_stats st;
	struct zlfs_fs *fs;
	int ret = files_mount(a->path, &mo, &fs), ret2;

	if (ret) {
		fprintf(stderr, "mkfs.zlfs: cannot mount the new filesystem to fill it: %s\n",
			strerror(-ret));
		return ret;
	}
	ret = sload_tree(fs, &so, &st);
	ret2 = files_unmount(fs);
	if (!ret && ret2)
		fprintf(stderr, "mkfs.zlfs: writing the filled filesystem: %s\n", strerror(-ret2));
	ret = ret ? ret : ret2;
	if (ret)
		fprintf(stderr, "mkfs.zlfs: %s holds a filesystem with part of %s only: run "
				"mkfs.zlfs again\n", a->path, a->root_dir);
	else if (!a->o.quiet)
		printf("loaded     %s: %llu directories, %llu files (%llu MiB), %llu symlinks, "
		       "%llu other, %llu hard links, %llu xattrs\n",
		       a->root_dir, (unsigned long long)st.dirs, (unsigned long long)st.files,
		       (unsigned long long)(st.bytes >> 20), (unsigned long long)st.symlinks,
		       (unsigned long long)st.specials, (unsigned long long)st.hardlinks,
		       (unsigned long long)st.xattrs);
	return ret;
}

int main(int argc, char **argv)
{
	struct mkfs_args a = {.passphrase_fd = -1, .wait_secs = ZDEV_WAIT_DEFAULT,
			      .o.packed_inodes = 1};
	struct zdev_open_opts oo;
	struct zlfs_sb_info sbi;
	struct zdev *dev;
	int ret;

	zlog_set_ident("mkfs.zlfs");
	ret = parse_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? 0 : ret;
	pin_clock(&a);
	if (a.encrypt && enc_setup(&a)) {
		zcrypt_wipe(a.pass, sizeof(a.pass));
		return 1;
	}
	oo = (struct zdev_open_opts){.wait_secs = a.wait_secs};
	ret = zdev_open(a.path, &oo, &dev);
	if (ret)
		return 1;
	ret = check_existing(dev, a.path, a.force);
	if (!ret) {
		if (!a.o.quiet && isatty(STDERR_FILENO) && zdev_geometry(dev)->nr_zones > 1024)
			a.o.progress = progress;
		ret = zlfs_mkfs(dev, &a.o, &sbi);
		if (!ret)
			ret = apply_stamp(dev, &sbi, &a.stamp);
	}
	if (!ret && !a.o.quiet)
		print_summary(dev, &sbi, a.o.plain_root);
	zdev_close(dev);
	if (!ret && a.root_dir)
		ret = load_root_dir(&a);
	zcrypt_wipe(a.pass, sizeof(a.pass));
	return ret ? 1 : 0;
}
