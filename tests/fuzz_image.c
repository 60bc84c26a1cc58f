/*
 * fuzz_image.c - fuzz target: a damaged or crafted device must never crash, hang or leak the
 * daemon's mount, its FUSE operations, a checkpoint written over the damage, or the check;
 * errors are fine.
 *
 * Setup builds small emulated base images through the daemon's own FUSE operations
 * (fuzz_fuse.c): a plain one (6 logs, mkfs --packed-inodes: its small inodes in inode packs)
 * and an encrypted one (10 logs, a key file, every inode a block of its own), each with a
 * directory of files, an indirect tree, xattrs over a chain of xattr nodes and value nodes,
 * an inline and a long symlink, a hard link, then an orphan in a checkpoint and files fsync'ed after it by a
 * process that dies (roll-forward work), and a power cut. Each input is:
 *   byte 0   which base (bits 0-1), what to run (bits 2-3: 0 mount read-only, check with
 *            repairs proposed and read everything through the file layer; 1 walk the FUSE
 *            operations read-only; 2-3 mount read-write, walk, change, collect, checkpoint,
 *            unmount, then mount read-only and check), bit 4: mount without the key;
 *   bytes 1-4 which names the changes hit;
 *   then up to 16 mutations of 8 bytes (fuzz_mut.h): fields of any zlfs block by kind, the
 *            newest superblock's geometry and layout, the newest checkpoint pack resealed
 *            whole, the emulator's header, zone table and journal, raw bytes anywhere.
 * The image is put back as it was after each input (the blocks edited, and whatever a
 * read-write mount wrote).
 *
 * Built with libFuzzer (LLVMFuzzerTestOneInput) when ZLFS_FUZZ is on and the compiler is
 * clang, and always as a plain driver that replays files named on the command line, or runs a
 * deterministic sweep of N generated inputs (-nN; ctest fuzz_image_sweep). In the plain driver
 * an input that runs over 30 s ends the process by SIGALRM: a hang is a failure, as is any
 * sanitizer report (the build aborts on them). FUZZ_SAVE=FILE keeps the input under way in
 * FILE (replayable after a crash), FUZZ_KEEP_IMAGE=FILE each damaged image, FUZZ_TRACE=1
 * prints what each input changed, FUZZ_SEED=N generates other inputs, and FUZZ_COMPRESS=1
 * makes the bases with mkfs's compression (LZ4: every file in compressed clusters, beside the
 * dentry mark of the file fsync'ed after the checkpoint; FUZZ_BASE_CACHE then apart).
 * May call: verify.h, files.h, fuzz_mut.h, fuzz_fuse.h, zdev_emu.h, log.h, zcrypt.h.
 */
#include "verify.h"
#include "log.h"
#include "zdev_emu.h"
#include "zcrypt.h"
#include "fuzz_mut.h"
#include "fuzz_fuse.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ZONE_SIZE (1u << 20)
#define READ_CAP (256u * 1024)  /* bytes read per file: fuzzed sizes can be huge */
#define MAX_OPS 16
#define NBASES 2
#define HANG_SECS 30

struct base {
	char path[600];
	struct fz_img img;
	uint8_t *pristine;          /* the whole image file as set up */
	uint64_t len;
	int enc;
};

static struct {
	struct base b[NBASES];
	char key[600];
	int ready;
} G;

__attribute__((noreturn)) static void die(const char *what, int err)
{
	fprintf(stderr, "fuzz_image: setup: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(2);
}

/* ---- building the base images ------------------------------------------------------------ */

static void write_key(void)
{
	uint8_t k[64];
	int fd;

	for (int i = 0; i < 64; i++)
		k[i] = (uint8_t)(i * 37 + 11);
	fd = open(G.key, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, k, sizeof(k)) != (ssize_t)sizeof(k) || close(fd))
		die("key file", errno);
}

static void mount_opts(const struct base *b, struct zlfs_mount_opts *mo,
		       struct zlfs_key_source *ks, int readonly, int nokey)
{
	memset(mo, 0, sizeof(*mo));
	memset(ks, 0, sizeof(*ks));
	ks->keyfile = G.key;
	mo->readonly = readonly;
	mo->key = b->enc && !nokey ? ks : NULL;
}

/* With FUZZ_BASE_CACHE=DIR, base images built once are reused by later processes (libFuzzer's
 * fork mode and tools/fuzz-long start many): DIR must be fresh for each build of the code. */
static int cache_path(const struct base *b, char *buf, size_t len)
{
	const char *dir = getenv("FUZZ_BASE_CACHE");

	if (!dir || !*dir)
		return 0;
	snprintf(buf, len, "%s/base-%d.img", dir, (int)(b - G.b));
	return 1;
}

static int copy_image(const char *from, const char *to)
{
	char cmd[1400];
	int n = snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s.tmp' && mv '%s.tmp' '%s'",
			 from, to, to, to);

	if (n < 0 || (size_t)n >= sizeof(cmd))
		return -1;
	return system(cmd);
}

static int cached_base(struct base *b)
{
	char p[700];

	return cache_path(b, p, sizeof(p)) && !access(p, R_OK) && !copy_image(p, b->path);
}

static void cache_base(const struct base *b)
{
	char p[700];

	if (cache_path(b, p, sizeof(p)) && copy_image(b->path, p))
		fprintf(stderr, "fuzz_image: could not cache the base image as %s\n", p);
}

static void make_base(struct base *b, uint64_t size, unsigned nr_logs, int enc, unsigned nfiles)
{
	struct zemu_create_opts o = {.size = size, .zone_size = ZONE_SIZE};
	struct zlfs_mkfs_opts mo = {.quiet = 1, .nr_logs = nr_logs};
	int compress = getenv("FUZZ_COMPRESS") && *getenv("FUZZ_COMPRESS");
	struct zlfs_mkfs_enc e = {.kdf = 1};
	struct zdev_open_opts oo = {0};
	struct zlfs_mount_opts mnt;
	struct zlfs_key_source ks;
	struct zcrypt_master m;
	struct zlfs_sb_info sbi;
	struct zlfs_fs *fs;
	struct zdev *dev;
	pid_t pid;
	int st, fd;

	b->enc = enc;
	if (cached_base(b))
		goto scan;
	if (enc) {
		if (zcrypt_keyfile_load(G.key, &m) || zcrypt_keycheck_make(&m, e.key_check))
			die("key", EINVAL);
		mo.enc = &e;
	}
	if (zemu_create(b->path, &o) || zdev_open(b->path, &oo, &dev))
		die("create", EIO);
	mo.packed_inodes = !enc; /* the plain base's small inodes in packs, the other's whole */
	mo.compress = compress; /* every new file in compressed clusters */
	mo.compress_alg = compress ? ZLFS_CLUSTER_LZ4 : 0;
	if (zlfs_mkfs(dev, &mo, &sbi))
		die("mkfs", EIO);
	zdev_close(dev);
	mount_opts(b, &mnt, &ks, 0, 0);
	if (files_mount(b->path, &mnt, &fs) || fz_fuse_populate(fs, nfiles))
		die("populate", EIO);
	pid = fork(); /* work for the next mount, left by a process that dies */
	if (pid < 0)
		die("fork", errno);
	if (!pid) {
		if (files_mount(b->path, &mnt, &fs))
			_exit(1);
		fz_fuse_crash_work(fs);
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("crash child", EIO);
	zemu_powercut(b->path, -1, 0, 0);
	cache_base(b);
scan:
	if (fz_img_open(&b->img, b->path))
		die("scan", EIO);
	if (!enc && !b->img.nbykind[ZLFS_KIND_IPACK]) /* the mutations need packs to hit */
		die("the plain base holds no inode pack", EINVAL);
	b->len = b->img.file_len;
	b->pristine = malloc(b->len);
	fd = open(b->path, O_RDONLY);
	if (!b->pristine || fd < 0 || pread(fd, b->pristine, b->len, 0) != (ssize_t)b->len)
		die("read image", errno);
	close(fd);
}

static void cleanup(void)
{
	for (int i = 0; i < NBASES; i++)
		if (G.b[i].path[0])
			unlink(G.b[i].path);
	if (G.key[0])
		unlink(G.key);
}

static void setup(void)
{
	const char *tmp = getenv("ZLFS_TEST_TMP");

	zlog_set_level(getenv("FUZZ_TRACE") ? ZLOG_WARN : ZLOG_ERR);
	snprintf(G.key, sizeof(G.key), "%s/fuzz-%d.key", tmp && *tmp ? tmp : "/tmp", getpid());
	for (int i = 0; i < NBASES; i++)
		snprintf(G.b[i].path, sizeof(G.b[i].path), "%s/fuzz-%d-%d.img",
			 tmp && *tmp ? tmp : "/tmp", getpid(), i);
	atexit(cleanup);
	write_key();
	make_base(&G.b[0], 16u << 20, 0, 0, 40);
	make_base(&G.b[1], 24u << 20, 10, 1, 12);
	G.ready = 1;
}

/* ---- putting an image back -------------------------------------------------------------- */

static void put_back(struct base *b, uint64_t off, uint64_t len)
{
	if (off >= b->len)
		return;
	if (len > b->len - off)
		len = b->len - off;
	if (pwrite(b->img.fd, b->pristine + off, len, (off_t)off) != (ssize_t)len)
		die("restore", errno);
}

/* After a mount that wrote: the emulator's regions whole, and each zone whose table entry
 * moved (zones are written only at their write pointer, so no other zone changed). An
 * edited emulator header may have moved the zones themselves: then everything. */
static void restore_written(struct base *b, int emu_edited)
{
	const struct fz_img *im = &b->img;
	uint8_t ent[32];

	if (emu_edited) {
		put_back(b, 0, b->len);
		return;
	}
	for (uint32_t z = 0; z < im->nr_zones; z++) {
		uint64_t at = im->table_off + (uint64_t)z * sizeof(ent);

		if (pread(im->fd, ent, sizeof(ent), (off_t)at) != (ssize_t)sizeof(ent) ||
		    memcmp(ent, b->pristine + at, sizeof(ent)))
			put_back(b, im->data_off + (uint64_t)z * im->zone_size, im->zone_size);
	}
	put_back(b, 0, im->data_off);
}

static void keep_image(const struct base *b, const char *to)
{
	static const uint8_t zero[4096];
	char orig[1400];
	int fd;

	if (copy_image(b->path, to))
		fprintf(stderr, "fuzz_image: could not keep the image as %s\n", to);
	if (b->enc)
		fprintf(stderr, "fuzz_image: %s is encrypted: key %s\n", to, G.key);
	/* and the base it was damaged from (sparse), for fuzz_mutate explain and minimising */
	snprintf(orig, sizeof(orig), "%s.orig", to);
	fd = open(orig, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)b->len))
		die("keep the base", errno);
	for (uint64_t off = 0; off < b->len; off += 4096) {
		size_t n = b->len - off < 4096 ? (size_t)(b->len - off) : 4096;

		if (memcmp(b->pristine + off, zero, n) &&
		    pwrite(fd, b->pristine + off, n, (off_t)off) != (ssize_t)n)
			die("keep the base", errno);
	}
	close(fd);
}

/* ---- the file layer over everything (read-only mode) -------------------------------------- */

struct walk {
	struct zlfs_fs *fs;
	uint32_t *queue, qlen;
	uint8_t *seen;
};

static int on_entry(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		    uint64_t next)
{
	struct walk *w = arg;

	(void)type;
	(void)next;
	if (len <= 2 && name[0] == '.' && (len == 1 || name[1] == '.'))
		return 0;
	if (ino < w->fs->sb.max_nid && !w->seen[ino]) {
		w->seen[ino] = 1;
		w->queue[w->qlen++] = ino;
	}
	return 0;
}

static void read_inode(struct walk *w, uint32_t ino, uint8_t *buf)
{
	struct node_page *np;
	uint32_t mode;
	uint64_t size;
	char list[1024];

	if (inode_get(w->fs, ino, &np))
		return;
	mode = le32_get(inode_of(np)->mode);
	size = le64_get(inode_of(np)->size);
	if (S_ISDIR(mode) && le32_get(inode_of(np)->dir_depth) <= 22)
		dir_iterate(w->fs, np, 0, on_entry, w);
	else if (S_ISREG(mode) || S_ISLNK(mode))
		data_read(w->fs, np, buf, size < READ_CAP ? size : READ_CAP, 0);
	if (xattr_list(w->fs, np, list, sizeof(list)) > 0)
		xattr_get(w->fs, np, "user.fuzz", buf, 256);
	node_put(w->fs, np);
}

static void read_everything(struct zlfs_fs *fs)
{
	struct walk w = {fs, calloc(fs->sb.max_nid, sizeof(uint32_t)), 0,
			 calloc(fs->sb.max_nid, 1)};
	uint8_t *buf = malloc(READ_CAP);
	uint32_t i;

	if (w.queue && w.seen && buf) {
		w.queue[w.qlen++] = ZLFS_ROOT_INO;
		w.seen[ZLFS_ROOT_INO] = 1;
		for (i = 0; i < w.qlen; i++)
			read_inode(&w, w.queue[i], buf);
	}
	free(buf);
	free(w.queue);
	free(w.seen);
}

/* ---- one input ------------------------------------------------------------------------------ */

static void check_ro(struct base *b, int nokey, int files_layer)
{
	struct zlfs_check_report rep = {.want_fixes = 1};
	struct zlfs_mount_opts mo;
	struct zlfs_key_source ks;
	struct zlfs_fs *fs;

	mount_opts(b, &mo, &ks, 1, nokey);
	if (files_mount(b->path, &mo, &fs))
		return;
	zlfs_check(fs, &rep);
	zlfs_check_report_free(&rep);
	if (files_layer) {
		read_everything(fs);
		files_unmount(fs);
	} else {
		fz_fuse_walk(fs, 0, NULL, 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_edit e = {.n = 0};
	struct zlfs_mount_opts mo;
	struct zlfs_key_source ks;
	struct zlfs_fs *fs;
	struct base *b;
	unsigned mode, nokey;
	char desc[256];
	int emu;

	if (!G.ready)
		setup();
	if (size < 5)
		return 0;
	b = &G.b[(data[0] & 3) % NBASES];
	mode = data[0] >> 2 & 3;
	nokey = data[0] >> 4 & 1;
	for (size_t i = 5, n = 0; i + FZ_OP_SIZE <= size && n < MAX_OPS; i += FZ_OP_SIZE, n++) {
		fz_apply(&b->img, &e, data + i, desc, sizeof(desc));
		if (getenv("FUZZ_TRACE") && desc[0])
			fprintf(stderr, "fuzz_image: %s\n", desc);
	}
	if (fz_edit_commit(&b->img, &e))
		die("commit", EIO);
	if (getenv("FUZZ_KEEP_IMAGE")) /* the damaged image, for the real binaries */
		keep_image(b, getenv("FUZZ_KEEP_IMAGE"));
	if (mode < 2) {
		check_ro(b, (int)nokey, mode == 0);
		fz_edit_undo(&b->img, &e);
		return 0;
	}
	mount_opts(b, &mo, &ks, 0, (int)nokey);
	if (!files_mount(b->path, &mo, &fs)) {
		fz_fuse_walk(fs, 1, data + 1, 4);
		check_ro(b, (int)nokey, 1); /* what the checkpoint over the damage left */
	}
	emu = e.emu_meta;
	fz_edit_undo(&b->img, &e);
	restore_written(b, emu);
	return 0;
}

#ifndef ZLFS_LIBFUZZER
/* The plain driver: inputs from files, or N generated ones (xorshift, fixed seed). */
static size_t gen_input(uint64_t *s, uint8_t *buf, size_t max)
{
	size_t n;

	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	buf[0] = (uint8_t)(*s >> 8);
	for (int i = 1; i < 5; i++)
		buf[i] = (uint8_t)(*s >> (8 * i + 16));
	n = 5;
	for (unsigned k = 0, nops = 1 + (unsigned)(*s >> 58) % 6; k < nops && n + FZ_OP_SIZE <= max;
	     k++, n += FZ_OP_SIZE)
		fz_gen_op(s, buf + n, (*s >> 50) % 4 == 0);
	return n;
}

static void save_input(const char *path, const uint8_t *buf, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(buf, 1, n, f) != n || fclose(f))
		die("save input", errno);
}

static int replay_file(const char *path)
{
	uint8_t buf[4096];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		perror(path);
		return 1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	alarm(HANG_SECS);
	LLVMFuzzerTestOneInput(buf, n);
	alarm(0);
	return 0;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 && !strncmp(argv[1], "-n", 2) ? atol(argv[1] + 2) : 0;
	uint64_t s = getenv("FUZZ_SEED") ? strtoull(getenv("FUZZ_SEED"), NULL, 0) | 1
					 : 0x9e3779b97f4a7c15ull;
	uint8_t buf[5 + MAX_OPS * FZ_OP_SIZE];
	int rc = 0;

	signal(SIGALRM, SIG_DFL); /* a hang ends the process: the run fails */
	setup();
	if (argc > 1 && !iters) {
		for (int i = 1; i < argc; i++)
			rc |= replay_file(argv[i]);
		return rc;
	}
	for (long k = 0; k < (iters ? iters : 300); k++) {
		size_t n = gen_input(&s, buf, sizeof(buf));

		if (getenv("FUZZ_TRACE"))
			fprintf(stderr, "fuzz_image: input %ld (mode %u base %u)\n", k, buf[0] >> 2 & 3,
				buf[0] & 1);
		if (getenv("FUZZ_SAVE")) /* the input under way: replayable after a crash */
			save_input(getenv("FUZZ_SAVE"), buf, n);
		alarm(HANG_SECS);
		LLVMFuzzerTestOneInput(buf, n);
		alarm(0);
	}
	printf("fuzz_image: %ld inputs over %u + %u metadata blocks, no crash, no hang\n",
	       iters ? iters : 300, G.b[0].img.nmeta, G.b[1].img.nmeta);
	return rc;
}
#endif
