/*
 * fuzz_image.c - fuzz target: damaged metadata must never crash, hang or leak the check path
 * or the read path; errors are fine.
 *
 * Setup builds one small emulated image, formats and populates it (directories, files of
 * several sizes, an indirect tree, xattrs, an inline symlink, hard links, a file fsync'ed
 * after the last checkpoint), and lists every metadata block on it (every block whose header
 * and checksum verify). Each input is a list of mutations of those blocks (6 bytes each:
 * block, offset, value, operation); most are resealed with a valid checksum so they reach the
 * semantic checks, some are left torn. The mutated image is then mounted read-only
 * (roll-forward included), checked with zlfs_check (repairs proposed), every directory
 * listed and every file, symlink and xattr read; the blocks are restored afterwards.
 *
 * Built with libFuzzer (LLVMFuzzerTestOneInput) when ZLFS_FUZZ is on and the compiler is
 * clang, and always as a plain driver that replays files named on the command line or a
 * deterministic sweep of N generated inputs (default 300): the ctest fuzz_image_sweep.
 * May call: verify.h, files.h, super.h, zdev_emu.h, format.h, log.h.
 */
#include "verify.h"
#include "log.h"
#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define IMG_SIZE (24u << 20)
#define ZONE_SIZE (1u << 20)
#define READ_CAP (256u * 1024)  /* bytes read per file: fuzzed sizes can be huge */
#define MAX_META 4096

static struct {
	char path[600];
	uint64_t data_off;          /* where device byte 0 lies in the image file */
	uint64_t seed;              /* checksum seed of the filesystem */
	uint32_t meta[MAX_META];    /* device block numbers of metadata blocks */
	uint32_t nmeta;
	int fd;                     /* the image file, for mutations */
} G;

__attribute__((noreturn)) static void die(const char *what, int err)
{
	fprintf(stderr, "fuzz_image: setup: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(2);
}

/* ---- building the image --------------------------------------------------------------- */

static uint32_t mk(struct zlfs_fs *fs, uint32_t parent, const char *name, uint32_t mode,
		   size_t size)
{
	struct node_page *p, *np;
	uint8_t *b = calloc(1, size + 1);
	uint32_t ino;
	int ret = inode_get(fs, parent, &p);

	if (ret || !b)
		die("parent", ret ? ret : ENOMEM);
	ret = inode_new(fs, mode, 0, 0, 0, parent, &np);
	if (ret)
		die("inode_new", ret);
	ino = np->nid;
	ret = dir_add(fs, p, name, strlen(name), ino, (uint8_t)IFTODT(mode));
	if (S_ISDIR(mode)) {
		inode_of(p)->nlink = le32_put(le32_get(inode_of(p)->nlink) + 1);
		node_dirty(fs, p);
	}
	for (size_t i = 0; i < size; i++)
		b[i] = (uint8_t)(ino + i * 13);
	if (!ret && size && data_write(fs, np, b, size, 0) != (int)size)
		ret = -EIO;
	if (!ret)
		ret = xattr_set(fs, np, "user.fuzz", name, strlen(name), 0);
	if (ret)
		die("populate", ret);
	free(b);
	node_put(fs, np);
	node_put(fs, p);
	return ino;
}

static void mk_symlink(struct zlfs_fs *fs, const char *target)
{
	uint32_t ino = mk(fs, ZLFS_ROOT_INO, "link", S_IFLNK | 0777, 0);
	struct node_page *np;

	if (inode_get(fs, ino, &np))
		die("symlink", EIO);
	memcpy(inode_of(np)->addr, target, strlen(target));
	inode_of(np)->flags = le32_put(ZLFS_IFLAG_INLINE);
	inode_of(np)->inline_size = le32_put((uint32_t)strlen(target));
	inode_of(np)->size = le64_put(strlen(target));
	node_dirty(fs, np);
	node_put(fs, np);
}

static void populate(void)
{
	struct zlfs_mount_opts mo = {0};
	struct zlfs_fs *fs;
	struct node_page *root;
	uint32_t d, f, i;
	char name[32];
	int ret = files_mount(G.path, &mo, &fs);

	if (ret)
		die("mount", ret);
	d = mk(fs, ZLFS_ROOT_INO, "dir", S_IFDIR | 0755, 0);
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "file-with-a-longer-name-%02u", i);
		mk(fs, d, name, S_IFREG | 0644, (size_t)i * 517);
	}
	mk(fs, mk(fs, d, "sub", S_IFDIR | 0755, 0), "deep", S_IFREG | 0600, 9000);
	f = mk(fs, ZLFS_ROOT_INO, "big", S_IFREG | 0644, 5u << 20); /* past the inode: nodes */
	mk_symlink(fs, "dir/sub/deep");
	if (!inode_get(fs, ZLFS_ROOT_INO, &root)) { /* a hard link */
		dir_add(fs, root, "big2", 4, f, DT_REG);
		node_put(fs, root);
	}
	if (!inode_get(fs, f, &root)) {
		inode_of(root)->nlink = le32_put(2);
		node_dirty(fs, root);
		node_put(fs, root);
	}
	ret = files_unmount(fs);
	if (ret)
		die("unmount", ret);
}

/* A file fsync'ed after the last checkpoint, then the process dies: roll-forward work. */
static void fsync_and_die(void)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		die("fork", errno);
	if (!pid) {
		struct zlfs_mount_opts mo = {0};
		struct zlfs_fs *fs;
		struct node_page *np;
		uint32_t ino;
		uint8_t b[12288];

		memset(b, 0x5a, sizeof(b));
		if (files_mount(G.path, &mo, &fs) || inode_get(fs, ZLFS_ROOT_INO, &np) ||
		    dir_lookup(fs, np, "big", 3, &ino, NULL))
			_exit(1);
		node_put(fs, np);
		if (inode_get(fs, ino, &np) || data_write(fs, np, b, sizeof(b), 4096) != sizeof(b))
			_exit(1);
		node_put(fs, np);
		_exit(files_fsync(fs, ino) ? 1 : 0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("fsync child", EIO);
	zemu_powercut(G.path, -1, 0, 0);
}

/* Every block below a write pointer whose header and checksum verify is metadata. */
static void list_meta(struct zdev *dev)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	uint8_t *b = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct zdev_zone z;
	uint32_t zone;
	uint64_t off;

	for (zone = 0; b && zone < g->nr_zones; zone++) {
		if (zdev_report_one(dev, zone, &z))
			die("report", EIO);
		for (off = z.start; off < z.wp && G.nmeta < MAX_META; off += ZLFS_BLOCK_SIZE)
			if (!zdev_read(dev, b, ZLFS_BLOCK_SIZE, off) &&
			    !zlfs_blk_verify(b, G.seed, ZLFS_KIND_MAX))
				G.meta[G.nmeta++] = (uint32_t)(off / ZLFS_BLOCK_SIZE);
	}
	zdev_buf_free(b);
}

/* The image file offset of device byte 0: where the superblock's bytes sit in the file. */
static void find_data_off(const uint8_t *sb)
{
	uint8_t *b = malloc(ZLFS_BLOCK_SIZE);
	off_t pos;

	for (pos = 0; b && pread(G.fd, b, ZLFS_BLOCK_SIZE, pos) == ZLFS_BLOCK_SIZE;
	     pos += ZLFS_BLOCK_SIZE)
		if (!memcmp(b, sb, ZLFS_BLOCK_SIZE)) {
			G.data_off = (uint64_t)pos - (uint64_t)G.meta[0] * ZLFS_BLOCK_SIZE;
			free(b);
			return;
		}
	die("superblock not found in the image file", ENOENT);
}

static void cleanup(void)
{
	unlink(G.path);
}

static void setup(void)
{
	struct zemu_create_opts o = {.size = IMG_SIZE, .zone_size = ZONE_SIZE};
	struct zlfs_mkfs_opts mo = {.quiet = 1};
	struct zdev_open_opts oo = {0};
	struct zlfs_sb_info sbi;
	struct zdev *dev;
	uint8_t *sb;
	const char *tmp = getenv("ZLFS_TEST_TMP");

	zlog_set_level(ZLOG_ERR);
	snprintf(G.path, sizeof(G.path), "%s/fuzz-%d.img", tmp && *tmp ? tmp : "/tmp", getpid());
	if (zemu_create(G.path, &o) || zdev_open(G.path, &oo, &dev))
		die("create", EIO);
	if (zlfs_mkfs(dev, &mo, &sbi))
		die("mkfs", EIO);
	zdev_close(dev);
	G.seed = sbi.seed;
	atexit(cleanup);
	populate();
	fsync_and_die();
	oo.readonly = 1;
	if (zdev_open(G.path, &oo, &dev))
		die("reopen", EIO);
	list_meta(dev);
	sb = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!G.nmeta || !sb || zdev_read(dev, sb, ZLFS_BLOCK_SIZE,
					  (uint64_t)G.meta[0] * ZLFS_BLOCK_SIZE))
		die("no metadata", EIO);
	zdev_close(dev);
	G.fd = open(G.path, O_RDWR);
	if (G.fd < 0)
		die("open", errno);
	find_data_off(sb);
	zdev_buf_free(sb);
}

/* ---- one input ------------------------------------------------------------------------ */

static const uint32_t interesting[] = {0, 1, 2, 3, 7, 255, 256, 1023, 1024, 4095, 4096,
				       65535, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};
#define NINTERESTING (sizeof(interesting) / sizeof(interesting[0]))

static void put32(uint8_t *b, uint32_t off, uint32_t v)
{
	off &= ~3u;
	if (off + 4 <= ZLFS_CSUM_OFF)
		memcpy(b + off, &(le32){le32_put(v)}, 4);
}

static uint32_t get32(const uint8_t *b, uint32_t off)
{
	le32 v;

	memcpy(&v, b + (off & ~3u) % (ZLFS_CSUM_OFF - 4), 4);
	return le32_get(v);
}

/* Apply mutation OP (val, off) to block B; another metadata block's address may be used. */
static void mutate(uint8_t *b, uint32_t off, uint8_t val, uint8_t op)
{
	off %= ZLFS_BLOCK_SIZE;
	switch (op & 7) {
	case 0: b[off] = val; break;
	case 1: b[off] ^= (uint8_t)(1u << (val & 7)); break;
	case 2: put32(b, off, interesting[val % NINTERESTING]); break;
	case 3: put32(b, off, get32(b, off) + (uint32_t)(int8_t)val); break;
	case 4: memset(b + (off & ~63u) % (ZLFS_CSUM_OFF - 64), 0, 64); break;
	case 5: put32(b, off, get32(b, (uint32_t)val * 16)); break;
	case 6: put32(b, off, G.meta[val % G.nmeta]); break; /* point at metadata */
	default: put32(b, off, G.meta[val % G.nmeta] + 1); break;
	}
}

struct touched {
	uint32_t blk[64];
	uint8_t *orig[64];
	int n;
};

static uint8_t *block_at(struct touched *t, uint32_t blk)
{
	static uint8_t work[64][ZLFS_BLOCK_SIZE];
	int i;

	for (i = 0; i < t->n; i++)
		if (t->blk[i] == blk)
			return work[i];
	if (t->n == 64)
		return NULL;
	t->orig[t->n] = malloc(ZLFS_BLOCK_SIZE);
	if (!t->orig[t->n] || pread(G.fd, t->orig[t->n], ZLFS_BLOCK_SIZE,
				     (off_t)(G.data_off + (uint64_t)blk * ZLFS_BLOCK_SIZE)) !=
				      ZLFS_BLOCK_SIZE) {
		free(t->orig[t->n]);
		return NULL;
	}
	memcpy(work[t->n], t->orig[t->n], ZLFS_BLOCK_SIZE);
	t->blk[t->n] = blk;
	return work[t->n++];
}

static void write_block(uint32_t blk, const uint8_t *b)
{
	if (pwrite(G.fd, b, ZLFS_BLOCK_SIZE, (off_t)(G.data_off + (uint64_t)blk * ZLFS_BLOCK_SIZE)) !=
	    ZLFS_BLOCK_SIZE)
		die("pwrite", errno);
}

/* Mutate per the input, 6 bytes a mutation; returns the blocks touched (to restore). */
static void apply_input(const uint8_t *data, size_t size, struct touched *t)
{
	size_t i;
	int raw = 0, k;

	for (i = 0; i + 6 <= size; i += 6) {
		uint32_t blk = G.meta[(data[i] | data[i + 1] << 8) % G.nmeta];
		uint8_t *b = block_at(t, blk);

		if (!b)
			break;
		mutate(b, (uint32_t)(data[i + 2] | data[i + 3] << 8), data[i + 4], data[i + 5]);
		raw |= data[i + 5] & 0x80;
	}
	for (k = 0; k < t->n; k++) {
		uint8_t *b = block_at(t, t->blk[k]);

		if (!raw) /* keep the checksum valid: reach the checks behind it */
			zlfs_blk_seal(b, G.seed);
		write_block(t->blk[k], b);
	}
}

static void restore(struct touched *t)
{
	for (int k = 0; k < t->n; k++) {
		write_block(t->blk[k], t->orig[k]);
		free(t->orig[k]);
	}
	t->n = 0;
}

/* Copy FROM over TO (the image file; G.fd stays valid: same file, rewritten in place). */
__attribute__((unused)) static int copy_file(const char *from, const char *to)
{
	static uint8_t b[1 << 20];
	int in = open(from, O_RDONLY), o = open(to, O_WRONLY | O_CREAT, 0644), ret = 0;
	ssize_t n;

	while (in >= 0 && o >= 0 && (n = read(in, b, sizeof(b))) > 0)
		if (write(o, b, (size_t)n) != n)
			ret = -1;
	if (in < 0 || o < 0)
		ret = -1;
	if (in >= 0)
		close(in);
	if (o >= 0)
		close(o);
	return ret;
}

/* ---- the read path over everything ------------------------------------------------------ */

struct walk {
	struct zlfs_fs *fs;
	uint32_t *queue, qlen;
	uint8_t *seen;
};

static int on_entry(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		    uint64_t next)
{
	struct walk *w = arg;

	(void)name;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct zlfs_check_report rep = {.want_fixes = 1};
	struct touched t = {.n = 0};
	struct zlfs_fs *fs;

	if (!G.nmeta)
		setup();
	apply_input(data, size, &t);
	if (!files_mount(G.path, &mo, &fs)) {
		zlfs_check(fs, &rep);
		zlfs_check_report_free(&rep);
		read_everything(fs);
		files_unmount(fs);
	}
	restore(&t);
	return 0;
}

#ifndef ZLFS_LIBFUZZER
/* The plain driver: inputs from files, or N generated ones (xorshift, fixed seed). */
static size_t gen_input(uint64_t *s, uint8_t *buf, size_t max)
{
	size_t n = 6 * (1 + (*s >> 7) % 6), i;

	for (i = 0; i < n && i < max; i++) {
		*s ^= *s << 13;
		*s ^= *s >> 7;
		*s ^= *s << 17;
		buf[i] = (uint8_t)(*s >> 24);
	}
	if (i > 5 && (*s >> 40) % 8) /* mostly resealed */
		for (size_t k = 5; k < i; k += 6)
			buf[k] &= 0x7f;
	return i;
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
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

/* Run fsck.zlfs ARGS on the image: its exit status, or -1 when it crashed. */
static int run_fsck(const char *args)
{
	const char *dir = getenv("ZLFS_BIN_DIR");
	char cmd[1400];
	int st;

	/* a sanitizer report must not pass for exit 1 ("errors corrected") */
	snprintf(cmd, sizeof(cmd), "ASAN_OPTIONS=exitcode=66 %s/fsck.zlfs %s %s >/dev/null 2>&1",
		 dir ? dir : "bin", args, G.path);
	st = system(cmd);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The repair sweep: fsck.zlfs -y on each mutated image must exit with a fsck(8) code and
 * leave an image that a second -y run does not make worse (0, 1 or 4 again). The image is
 * copied back whole afterwards: repair writes. */
static int repair_sweep(long iters)
{
	uint64_t s = 0x2545f4914f6cdd1dull;
	uint8_t buf[64];
	char copy[700];
	long k, bad = 0;

	snprintf(copy, sizeof(copy), "%s.orig", G.path);
	if (copy_file(G.path, copy))
		die("copy", errno);
	for (k = 0; k < iters; k++) {
		struct touched t = {.n = 0};
		size_t n = gen_input(&s, buf, sizeof(buf));
		int a, b;

		apply_input(buf, n, &t);
		a = run_fsck("-y");
		b = a == 8 ? 8 : run_fsck("-y");
		for (int i = 0; i < t.n; i++)
			free(t.orig[i]);
		if ((a != 0 && a != 1 && a != 4 && a != 8) || (b != 0 && b != 1 && b != 4 && b != 8)) {
			fprintf(stderr, "fuzz_image: repair input %ld: fsck -y exits %d then %d; input:",
				k, a, b);
			for (size_t i = 0; i < n; i++)
				fprintf(stderr, " %02x", buf[i]);
			fprintf(stderr, "\n");
			bad++;
		}
		if (copy_file(copy, G.path))
			die("restore", errno);
	}
	unlink(copy);
	printf("fuzz_image: %ld repair runs, %ld bad\n", iters, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 && argv[1][0] == '-' && argv[1][1] == 'n' ? atol(argv[1] + 2) : 0;

	if (argc > 1 && !strncmp(argv[1], "-r", 2)) {
		int rc;

		setup();
		rc = repair_sweep(atol(argv[1] + 2));
		close(G.fd);
		return rc;
	}
	uint64_t s = 0x9e3779b97f4a7c15ull;
	uint8_t buf[64];
	int i, rc = 0;

	setup();
	if (argc > 1 && !iters) {
		for (i = 1; i < argc; i++)
			rc |= replay_file(argv[i]);
	} else {
		for (long k = 0; k < (iters ? iters : 300); k++) {
			size_t n = gen_input(&s, buf, sizeof(buf));

			if (getenv("FUZZ_TRACE"))
				fprintf(stderr, "fuzz_image: input %ld\n", k);
			LLVMFuzzerTestOneInput(buf, n);
		}
		printf("fuzz_image: %ld inputs over %u metadata blocks, no crash\n",
		       iters ? iters : 300, G.nmeta);
	}
	close(G.fd);
	return rc;
}
#endif
