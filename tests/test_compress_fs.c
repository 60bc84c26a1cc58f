/*
 * test_compress_fs.c - compressed files (docs/compression.md, fs/file/dcluster.c) through the
 * real daemon: mkfs --compress, mounted with compress=lz4 and compress=zstd, plain and
 * encrypted.
 *
 * Each case writes files whose content a model in memory follows - compressible text in
 * large and in small appends, random data, a sparse file - then overwrites parts of them
 * across cluster boundaries, truncates inside clusters down and up, punches holes, reads and
 * writes with O_DIRECT, and checks every byte against the model, before and after a remount,
 * with fsck clean (given the key, it verifies every compressed cluster's hash). Stored blocks
 * (st_blocks) must be fewer than the logical ones for text, and equal for random data. A
 * mount with compress=none makes new files plain, while the compressed ones stay readable
 * and writable. t_corrupt damages one stored block of a compressed cluster on the image:
 * reading that cluster's range says EIO, the rest of the file reads, the daemon lives on,
 * and fsck reports the cluster. t_gc has GC move an encrypted compressed file's blocks;
 * t_chattr turns compression on and off with FS_IOC_SETFLAGS; t_parallel reads one file from
 * four threads while another is rewritten; t_accounting checks zlfs-ctl stats' compression
 * figures and zlfs-ctl compress-info against st_blocks; t_readahead reads compressed files
 * sequentially in small requests, which the daemon reads ahead of, before and after changes.
 * Writes of many clusters, stored in runs, are test_compress_runs.c's cases.
 */
#include "compress_fs.h"
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define NF 16

static char img[512], mnt[512], bin[512], key[512], opts[700], fsck_args[600];
static pid_t daemon_pid = -1;
static struct mfile files[NF];

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Compressible text (a line numbered by its offset) or random bytes. */
void gen(uint8_t *b, size_t n, size_t off, int random)
{
	char line[64];

	for (size_t i = 0; i < n;) {
		size_t at = (off + i) % 48, k;

		if (random) {
			b[i++] = (uint8_t)next_rand();
			continue;
		}
		snprintf(line, sizeof(line), "line %010zu of the text file....... ok\n",
			 (off + i) / 48);
		for (k = at; k < 48 && i < n; k++)
			b[i++] = (uint8_t)line[k];
	}
}

const char *at(const char *name)
{
	static char p[4][600];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", mnt, name);
	return p[k];
}

const char *mnt_dir(void) { return mnt; }

struct mfile *mf(const char *name)
{
	for (int i = 0; i < NF; i++)
		if (files[i].name && !strcmp(files[i].name, name))
			return &files[i];
	for (int i = 0; i < NF; i++)
		if (!files[i].name) {
			files[i].name = name;
			return &files[i];
		}
	ck_abort_msg("model full");
	return NULL;
}

void msize(struct mfile *f, size_t size)
{
	f->d = realloc(f->d, size ? size : 1);
	ck_assert_ptr_nonnull(f->d);
	if (size > f->size)
		memset(f->d + f->size, 0, size - f->size);
	f->size = size;
}

void model_free(void)
{
	for (int i = 0; i < NF; i++) {
		free(files[i].d);
		files[i] = (struct mfile){0};
	}
}

/* Write N bytes (text or random) at OFF of NAME in requests of up to CHUNK, as the model. */
void put(const char *name, size_t off, size_t n, int random, size_t chunk, int flags)
{
	struct mfile *f = mf(name);
	uint8_t *b = malloc(n ? n : 1);
	int fd = open(at(name), O_WRONLY | O_CREAT | flags, 0644);

	ck_assert_int_ge(fd, 0);
	gen(b, n, off, random);
	for (size_t done = 0; done < n;) {
		size_t k = n - done < chunk ? n - done : chunk;

		ck_assert_int_eq(pwrite(fd, b + done, k, (off_t)(off + done)), (ssize_t)k);
		done += k;
	}
	close(fd);
	if (off + n > f->size || !f->d)
		msize(f, off + n > f->size ? off + n : f->size);
	memcpy(f->d + off, b, n);
	free(b);
}

static void trunc_to(const char *name, size_t size)
{
	ck_assert_int_eq(truncate(at(name), (off_t)size), 0);
	msize(mf(name), size);
}

static void punch(const char *name, size_t off, size_t len)
{
	struct mfile *f = mf(name);
	int fd = open(at(name), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				   (off_t)len), 0);
	close(fd);
	if (off < f->size)
		memset(f->d + off, 0, (off + len < f->size ? off + len : f->size) - off);
}

/* Every file of the model reads back byte for byte, and has its size. */
void check_all(void)
{
	for (int i = 0; i < NF; i++) {
		struct mfile *f = &files[i];
		uint8_t *b;
		struct stat st;
		int fd;

		if (!f->name)
			continue;
		ck_assert_int_eq(stat(at(f->name), &st), 0);
		ck_assert_int_eq((size_t)st.st_size, f->size);
		b = malloc(f->size + 1);
		fd = open(at(f->name), O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, b, f->size + 1, 0), (ssize_t)f->size);
		close(fd);
		if (memcmp(b, f->d, f->size)) {
			size_t j = 0;

			while (b[j] == f->d[j])
				j++;
			ck_abort_msg("%s: byte %zu is 0x%02x, expected 0x%02x", f->name, j, b[j],
				     f->d[j]);
		}
		free(b);
	}
}

long stored(const char *name)
{
	struct stat st;

	ck_assert_int_eq(stat(at(name), &st), 0);
	return (long)st.st_blocks * 512;
}

void fresh(const char *mkfs_args, int encrypt)
{
	struct zemu_create_opts o = {.size = 128 << 20, .zone_size = 2 << 20};

	tu_fresh_fs("compress", &o, img, sizeof(img), mnt, sizeof(mnt));
	fsck_args[0] = 0;
	if (encrypt) {
		tu_path(key, sizeof(key), "compress.key");
		unlink(key);
		ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
		snprintf(fsck_args, sizeof(fsck_args), "--keyfile %s", key);
	}
	ck_assert_int_eq(tu_sh("%s -q -f %s %s%s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
			       mkfs_args, encrypt ? "--encrypt --keyfile " : "", encrypt ? key : "",
			       img), 0);
	model_free();
}

/* Mount with compress=ALG (and the key of an encrypted image). */
void up(const char *alg)
{
	snprintf(opts, sizeof(opts), "compress=%s%s%s", alg, fsck_args[0] ? ",keyfile=" : "",
		 fsck_args[0] ? key : "");
	daemon_pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(daemon_pid, 0);
}

/* Unmount; fsck finds nothing (with the key, it decompresses every cluster). */
void down(void)
{
	ck_assert_int_eq(tu_daemon_stop(mnt, daemon_pid), 0);
	daemon_pid = -1;
	ck_assert_int_eq(tu_sh("%s -n %s %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), fsck_args,
			       img), 0);
}

void remount_end(const char *alg)
{
	check_all();
	down();
	up(alg);
	check_all();
	down();
	model_free();
}

/* O_DIRECT on a compressed file: served as buffered I/O is, byte for byte. */
static void direct_io(const char *name, size_t off)
{
	struct mfile *f = mf(name);
	uint8_t *b, *r;
	int fd = open(at(name), O_RDWR | O_DIRECT);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_memalign((void **)&b, 4096, 3 * 4096), 0);
	ck_assert_int_eq(posix_memalign((void **)&r, 4096, 3 * 4096), 0);
	gen(b, 3 * 4096, off + 7, 0);
	ck_assert_int_eq(pwrite(fd, b, 3 * 4096, (off_t)off), 3 * 4096);
	ck_assert_int_eq(pread(fd, r, 3 * 4096, (off_t)off), 3 * 4096);
	ck_assert(!memcmp(b, r, 3 * 4096));
	close(fd);
	if (off + 3 * 4096 > f->size)
		msize(f, off + 3 * 4096);
	memcpy(f->d + off, b, 3 * 4096);
	free(b);
	free(r);
}

static void workload(const char *alg, int encrypt)
{
	const size_t tsize = 2 << 20, rsize = 1 << 20;
	long t, r;
	int fd;

	fresh("--compress", encrypt);
	up(alg);
	put("text", 0, tsize, 0, 128 << 10, 0);
	put("rand", 0, rsize, 1, 128 << 10, 0);
	t = stored("text");
	r = stored("rand");
	ck_assert_msg(t < (long)tsize / 2, "text: %ld bytes stored for %zu", t, tsize);
	ck_assert_msg(r == (long)rsize, "random: %ld bytes stored for %zu", r, rsize);
	for (int i = 0; i < 60; i++) { /* overwrites of any size and place, across clusters */
		const char *name = i % 3 ? "text" : "rand";
		size_t size = mf(name)->size, off = next_rand() % (size + CB);
		size_t n = 1 + next_rand() % (3 * CB);

		put(name, off, n, i % 4 == 0, n, 0);
	}
	check_all();
	trunc_to("text", 1000003); /* inside a compressed cluster */
	trunc_to("rand", 300001);  /* inside a raw one */
	trunc_to("text", 1500000); /* up again: zeros */
	check_all();
	punch("text", 10000, 70000);
	punch("text", 200 * 1024, 3 * CB);
	punch("rand", 5000, 100);
	punch("rand", 2 * CB + 100, 3 * CB);
	put("sparse", (5 << 20) + 1234, 10000, 0, 10000, 0); /* a hole before */
	fd = open(at("sparse"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_DATA), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_END), (5 << 20) + 1234 + 10000);
	close(fd);
	ck_assert_int_le(stored("sparse"), 2 * CB);
	for (int i = 0; i < 300; i++) /* small appends: raw blocks, their clusters compressed */
		put("appends", mf("appends")->size, 333, 0, 333, O_APPEND);
	ck_assert_msg(stored("appends") < (long)mf("appends")->size,
		      "appends: %ld bytes stored for %zu", stored("appends"), mf("appends")->size);
	direct_io("text", 64 << 10);
	direct_io("rand", 4096);
	check_all();
	down();
	up("none"); /* new files are plain; the compressed ones read and write as before */
	check_all();
	put("plain", 0, 256 << 10, 0, 128 << 10, 0);
	ck_assert_int_eq(stored("plain"), 256 << 10);
	put("text", 3 * CB + 5, 2 * CB, 0, 2 * CB, 0);
	remount_end(alg);
}

START_TEST(t_lz4) { workload("lz4", 0); }
END_TEST

START_TEST(t_zstd) { workload("zstd", 0); }
END_TEST

START_TEST(t_lz4_encrypted) { workload("lz4", 1); }
END_TEST

START_TEST(t_zstd_encrypted) { workload("zstd:9", 1); }
END_TEST

/* A reader of random ranges of "text" (direct_io: every read reaches the daemon, whose
 * threads decompress side by side, each with its codec context). */
static const struct mfile *read_f; /* set before the readers start, unchanged meanwhile */
static char read_path[600];

static void *reader(void *arg)
{
	const struct mfile *f = read_f;
	uint64_t r = (uintptr_t)arg * 2654435761u + 1;
	uint8_t *b = malloc(64 << 10);
	int fd = open(read_path, O_RDONLY), bad = fd < 0 || !b;

	for (int i = 0; !bad && i < 300; i++) {
		size_t off, n;

		r = r * 6364136223846793005ull + 1442695040888963407ull;
		off = (size_t)(r >> 20) % f->size;
		n = 1 + (size_t)(r >> 44) % (64 << 10);
		if (off + n > f->size)
			n = f->size - off;
		bad = pread(fd, b, n, (off_t)off) != (ssize_t)n || memcmp(b, f->d + off, n);
	}
	if (fd >= 0)
		close(fd);
	free(b);
	return (void *)(uintptr_t)bad;
}

/* Four readers of one compressed file beside a writer of another, partial overwrites
 * rewriting its clusters: every byte read is the model's, and the written file after. */
START_TEST(t_parallel)
{
	pthread_t th[4];
	void *bad;

	fresh("--compress", 0);
	snprintf(opts, sizeof(opts), "compress=zstd,direct_io");
	daemon_pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(daemon_pid, 0);
	put("text", 0, 1 << 20, 0, 128 << 10, 0);
	put("other", 0, 512 << 10, 0, 128 << 10, 0);
	read_f = mf("text");
	snprintf(read_path, sizeof(read_path), "%s", at("text"));
	for (uintptr_t i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader, (void *)i), 0);
	for (int i = 0; i < 100; i++) /* this thread writes meanwhile */
		put("other", next_rand() % (512 << 10), 1 + next_rand() % (2 * CB), i % 3 == 0,
		    64 << 10, 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(th[i], &bad), 0);
		ck_assert_msg(!bad, "reader %d read other bytes than the model's", i);
	}
	check_all();
	down();
	model_free();
}
END_TEST

static int getflags(const char *name)
{
	int fd = open(at(name), O_RDONLY), flags = -1;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
	close(fd);
	return flags;
}

/* FS_IOC_SETFLAGS of NAME to FLAGS: 0 or the errno. */
static int setflags(const char *name, int flags)
{
	int fd = open(at(name), O_RDONLY), ret;

	ck_assert_int_ge(fd, 0);
	ret = ioctl(fd, FS_IOC_SETFLAGS, &flags) ? errno : 0;
	close(fd);
	return ret;
}

/* chattr +c / -c: FS_COMPR_FL turns a file's compression on or off while it is empty (an
 * inline one that held bytes before too), and is refused on a file with data (EINVAL) and
 * with any other flag (EOPNOTSUPP); lsattr shows it; a directory takes it (t_policy). */
START_TEST(t_chattr)
{
	fresh("--compress", 0);
	up("none");
	put("c", 0, 0, 0, 1, 0);
	ck_assert_int_eq(getflags("c"), 0);
	ck_assert_int_eq(setflags("c", FS_COMPR_FL), 0);
	ck_assert_int_eq(getflags("c"), FS_COMPR_FL);
	put("c", 0, 256 << 10, 0, 128 << 10, 0);
	ck_assert_int_lt(stored("c"), 128 << 10);
	ck_assert_int_eq(setflags("c", 0), EINVAL);
	ck_assert_int_eq(getflags("c"), FS_COMPR_FL);
	put("p", 0, 64 << 10, 0, 64 << 10, 0);
	ck_assert_int_eq(setflags("p", FS_COMPR_FL), EINVAL);
	ck_assert_int_eq(stored("p"), 64 << 10);
	put("i", 0, 100, 1, 100, 0); /* inline, then emptied: its area keeps old bytes */
	trunc_to("i", 0);
	ck_assert_int_eq(setflags("i", FS_COMPR_FL), 0);
	put("i", 0, 3 * CB + 10, 0, 3 * CB + 10, 0);
	ck_assert_int_eq(setflags("c", FS_COMPR_FL | FS_SYNC_FL), EOPNOTSUPP);
	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	ck_assert_int_eq(getflags("d"), 0);
	ck_assert_int_eq(setflags("d", FS_COMPR_FL | FS_SYNC_FL), EOPNOTSUPP);
	ck_assert_int_eq(setflags("d", FS_COMPR_FL), 0);
	ck_assert_int_eq(getflags("d"), FS_COMPR_FL);
	check_all();
	down();
	up("lz4");
	put("n", 0, 0, 0, 1, 0);
	ck_assert_int_eq(getflags("n"), FS_COMPR_FL);
	ck_assert_int_eq(setflags("n", 0), 0); /* -c: plain from the first byte */
	put("n", 0, 64 << 10, 0, 64 << 10, 0);
	ck_assert_int_eq(stored("n"), 64 << 10);
	check_all();
	down();
	up("none");
	check_all();
	ck_assert_int_eq(getflags("c"), FS_COMPR_FL);
	ck_assert_int_eq(getflags("n"), 0);
	down();
	model_free();
}
END_TEST

/* Is NAME stored compressed: its flag, and for LEN bytes of text written, fewer bytes stored. */
static int compressed(const char *name, size_t len)
{
	int flag = getflags(name) == FS_COMPR_FL;

	ck_assert_int_eq(flag, stored(name) < (long)len);
	return flag;
}

/* Which new files are compressed: compress_extension= and nocompress_extension= (F2FS's
 * semantics, case ignored, the name's suffix after a dot), chattr +c on a directory passed on
 * to the files and directories made in it (not to those already there), nocompress_extension
 * over both; chattr -c on the directory stops it. The flags survive a remount, fsck accepts
 * a flagged directory. */
START_TEST(t_policy)
{
	static const char *const names[] = {"a.txt", "b.LOG", "c.dat", "txt", "d/x.dat", "d/y.jpg",
					     "d/sub/z.dat", "e/w.txt.jpg", "d/after.dat", "e/v.c"};
	static const int want[] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0};
	const size_t n = 64 << 10;

	fresh("--compress", 0); /* the feature; new files plain by default */
	snprintf(opts, sizeof(opts), "compress_extension=txt:log,nocompress_extension=jpg:JPEG");
	daemon_pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(daemon_pid, 0);
	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	ck_assert_int_eq(mkdir(at("e"), 0755), 0);
	put("d/before.dat", 0, n, 0, n, 0); /* there before +c: stays plain */
	ck_assert_int_eq(setflags("d", FS_COMPR_FL), 0);
	ck_assert_int_eq(getflags("d"), FS_COMPR_FL);
	ck_assert_int_eq(mkdir(at("d/sub"), 0755), 0);
	ck_assert_int_eq(getflags("d/sub"), FS_COMPR_FL);
	ck_assert_int_eq(getflags("e"), 0);
	for (size_t i = 0; i + 2 < sizeof(names) / sizeof(names[0]); i++)
		put(names[i], 0, n, 0, n, 0);
	ck_assert_int_eq(setflags("d", 0), 0);
	ck_assert_int_eq(getflags("d"), 0);
	put("d/after.dat", 0, n, 0, n, 0);
	put("e/v.c", 0, n, 0, n, 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(compressed(names[i], n) == want[i], "%s: compressed %d, expected %d",
			      names[i], !want[i], want[i]);
	ck_assert_int_eq(compressed("d/before.dat", n), 0);
	down();
	daemon_pid = tu_daemon_start(img, mnt, NULL); /* no lists: only the flags count now */
	ck_assert_int_gt(daemon_pid, 0);
	check_all();
	ck_assert_int_eq(getflags("d/sub"), FS_COMPR_FL);
	put("d/sub/q.jpg", 0, n, 0, n, 0);
	put("q.txt", 0, n, 0, n, 0);
	ck_assert_int_eq(compressed("d/sub/q.jpg", n), 1);
	ck_assert_int_eq(compressed("q.txt", n), 0);
	down();
	model_free();
}
END_TEST

/* fsck checks a compressed cluster's slots in a direct node (the inode's are checked when it
 * is read): the stored block of the node's first cluster moved one slot on (marker, null,
 * block, null: a compressed cluster with no stored block) is an error, though the library
 * wrote the node as it writes any. */
START_TEST(t_fsck_slots)
{
	struct zlfs_mount_opts mo = {0};
	struct node_page *np;
	struct zlfs_fs *fs;
	char report[600];
	struct dref ref;
	struct stat st;
	le32 *s;

	fresh("--compress=lz4", 0);
	daemon_pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(daemon_pid, 0);
	put("t", 0, 4 << 20, 0, 128 << 10, 0);
	ck_assert_int_eq(stat(at("t"), &st), 0);
	down();
	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, (uint32_t)st.st_ino, &np), 0);
	ck_assert_int_eq(data_ref(fs, np, 976, 0, &ref), 0); /* past the inode's 976 */
	ck_assert_ptr_ne(ref.np, np);
	ck_assert_uint_eq(ref.slot, 0);
	s = node_slot(ref.np, 0);
	ck_assert_uint_eq(le32_get(s[0]), ZLFS_ADDR_COMPRESSED);
	ck_assert_uint_eq(le32_get(s[2]), 0);
	s[2] = s[1];
	s[1] = 0;
	node_dirty(fs, ref.np);
	node_put(fs, ref.np);
	node_put(fs, np);
	ck_assert_int_eq(files_unmount(fs), 0);
	tu_path(report, sizeof(report), "fsck.out");
	ck_assert_int_ne(tu_sh("%s -n %s >%s 2>&1", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img,
			       report), 0);
	ck_assert(tu_file_has(report, "a compressed cluster with no stored block"));
	model_free();
}
END_TEST

/* GC moves a compressed file's stored blocks as they are: a compressed file and a random one
 * written in turns share zones; once the random one is gone, GC (asked for, nothing in the
 * background) moves the compressed clusters' blocks out of those zones, and after a remount
 * (nothing left in the page cache) every byte reads back and fsck is clean. */
START_TEST(t_gc)
{
	long migrated;

	fresh("--compress=lz4", 1);
	snprintf(opts, sizeof(opts), "nogc,keyfile=%s", key);
	daemon_pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(daemon_pid, 0);
	for (size_t i = 0; i < 48; i++) {
		put("keep", i * (64 << 10), 64 << 10, 0, 64 << 10, 0);
		put("junk", i * (64 << 10), 64 << 10, 1, 64 << 10, 0);
	}
	ck_assert_int_lt(stored("keep"), (long)mf("keep")->size / 2);
	ck_assert_int_eq(unlink(at("junk")), 0);
	free(mf("junk")->d);
	*mf("junk") = (struct mfile){0};
	ck_assert_int_eq(tu_sh("%s gc %s 16 >/dev/null", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt),
			 0);
	migrated = tu_ctl_stat(mnt, "bytes_migrated");
	ck_assert_int_gt(tu_ctl_stat(mnt, "zones_reclaimed"), 0);
	ck_assert_msg(migrated > 0, "GC moved %ld bytes", migrated);
	down();
	daemon_pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(daemon_pid, 0);
	check_all();
	down();
	model_free();
}
END_TEST

static void flip(uint8_t *b) { b[100] ^= 0x5a; }

/* Change one byte of device block ADDR of the image (found by its content: the block of
 * compressed data it holds is nowhere else). */
static void damage_block(uint32_t addr, void (*edit)(uint8_t *b))
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	static uint8_t f[ZLFS_BLOCK_SIZE];
	uint8_t *want = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct zlfs_fs *fs;
	FILE *fp;
	long found = -1;

	ck_assert_ptr_nonnull(want);
	ck_assert_int_eq(zlfs_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(zdev_read(fs->dev, want, ZLFS_BLOCK_SIZE, (uint64_t)addr * ZLFS_BLOCK_SIZE),
			 0);
	zlfs_unmount(fs);
	fp = fopen(img, "r+b");
	ck_assert_ptr_nonnull(fp);
	for (long pos = 0; found < 0 && fread(f, 1, sizeof(f), fp) == sizeof(f); pos++)
		if (!memcmp(f, want, sizeof(f)))
			found = pos;
	zdev_buf_free(want);
	ck_assert_int_ge(found, 0);
	edit(f);
	ck_assert_int_eq(fseek(fp, found * ZLFS_BLOCK_SIZE, SEEK_SET), 0);
	ck_assert_int_eq(fwrite(f, 1, sizeof(f), fp), sizeof(f));
	fclose(fp);
}

/* Cluster 1 of INO: its slots (the marker, then its stored blocks). */
static void cluster_slots(uint32_t ino, uint32_t *slots)
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct node_page *np;
	struct zlfs_fs *fs;
	struct dref ref;

	ck_assert_int_eq(zlfs_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	ck_assert_int_eq(data_cluster_log(np), 2);
	ck_assert_int_eq(data_ref(fs, np, 4, 0, &ref), 0);
	for (int i = 0; i < 4; i++)
		slots[i] = le32_get(*node_slot(ref.np, ref.slot + (uint32_t)i));
	node_put(fs, ref.np);
	node_put(fs, np);
	zlfs_unmount(fs);
}

START_TEST(t_corrupt)
{
	uint32_t slots[4];
	char report[600];
	struct stat st;
	uint8_t *b;
	int fd;

	fresh("--compress=lz4", 0); /* the mkfs default: no compress= needed */
	daemon_pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(daemon_pid, 0);
	put("t", 0, 8 * CB, 0, 8 * CB, 0);
	ck_assert_int_lt(stored("t"), 8 * CB);
	ck_assert_int_eq(stat(at("t"), &st), 0);
	down();
	cluster_slots((uint32_t)st.st_ino, slots);
	ck_assert_uint_eq(slots[0], ZLFS_ADDR_COMPRESSED);
	ck_assert_uint_ne(slots[1], 0);
	damage_block(slots[1], flip);
	tu_path(report, sizeof(report), "fsck.out");
	ck_assert_int_ne(tu_sh("%s -n %s >%s 2>&1", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img,
			       report), 0);
	ck_assert(tu_file_has(report, "compressed cluster 1"));
	daemon_pid = tu_daemon_start(img, mnt, "direct_io");
	ck_assert_int_gt(daemon_pid, 0);
	b = malloc(8 * CB);
	fd = open(at("t"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	errno = 0;
	ck_assert_int_eq(pread(fd, b, CB, CB), -1); /* cluster 1 */
	ck_assert_int_eq(errno, EIO);
	errno = 0;
	ck_assert_int_eq(pread(fd, b, 100, CB + 5000), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(pread(fd, b, CB, 0), CB); /* clusters 0 and 2 on: intact */
	ck_assert_int_eq(pread(fd, b + CB, 6 * CB, 2 * CB), 6 * CB);
	ck_assert(!memcmp(b, mf("t")->d, CB));
	ck_assert(!memcmp(b + CB, mf("t")->d + 2 * CB, 6 * CB));
	close(fd);
	free(b);
	ck_assert(tu_mounted(mnt)); /* the daemon lives on */
	ck_assert_int_eq(tu_daemon_stop(mnt, daemon_pid), 0);
	daemon_pid = -1;
	model_free();
}
END_TEST

/* Read NAME front to back in requests of STEP bytes (with -o direct_io each reaches the
 * daemon, which reads ahead of them) and compare with the model. */
static void read_seq(const char *name, size_t step)
{
	struct mfile *f = mf(name);
	uint8_t *b = malloc(step);
	int fd = open(at(name), O_RDONLY);
	size_t off = 0;
	ssize_t got;

	ck_assert_int_ge(fd, 0);
	while ((got = pread(fd, b, step, (off_t)off)) > 0) {
		ck_assert_msg(off + (size_t)got <= f->size && !memcmp(b, f->d + off, (size_t)got),
			      "%s: bytes %zu..%zu differ", name, off, off + (size_t)got);
		off += (size_t)got;
	}
	ck_assert_int_eq(got, 0);
	ck_assert_uint_eq(off, f->size);
	close(fd);
	free(b);
}

/* Read-ahead of compressed files by whole clusters: sequential reads in small requests
 * (served from the window past the first ones) over compressed, raw and partial clusters
 * read back byte for byte, also after the file changed inside what was read ahead and after
 * it was truncated inside a cluster; plain and encrypted, with LZ4 and zstd's 8-block
 * clusters. */
static void readahead_case(const char *mkfs_args, int encrypt)
{
	fresh(mkfs_args, encrypt);
	snprintf(opts, sizeof(opts), "direct_io%s%s", encrypt ? ",keyfile=" : "", encrypt ? key : "");
	daemon_pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(daemon_pid, 0);
	put("f", 0, 2 << 20, 0, 1 << 20, 0);
	put("f", 2 << 20, 1 << 20, 1, 1 << 20, 0);             /* raw clusters */
	put("f", 3 << 20, (1 << 20) + 1234, 0, 1 << 20, 0);    /* a partial last cluster */
	for (size_t step = 4096; step <= 64 << 10; step *= 4)
		read_seq("f", step);
	put("f", (1 << 20) + 5000, 30000, 0, 30000, 0); /* inside windows read ahead */
	put("f", (2 << 20) + 100, 4096, 0, 4096, 0);
	read_seq("f", 16 << 10);
	trunc_to("f", (3 << 20) + 70001);
	read_seq("f", 4096);
	put("f", mf("f")->size, 50000, 0, 50000, 0);
	read_seq("f", 8192);
	down();
	model_free();
}

START_TEST(t_readahead)
{
	readahead_case("--compress=lz4", 0);
	readahead_case("--compress=zstd --cluster-blocks 8", 1);
}
END_TEST

/* zlfs-ctl compress-info FILE's line, parsed; 0, or the command's exit status. */
struct cinfo {
	unsigned long long size, blocks;
	unsigned cluster;
	char compressed[8], alg[8];
};

static int compress_info(const char *name, struct cinfo *ci)
{
	char out[600], line[1200];
	const char *kv;
	FILE *f;
	int ret;

	tu_path(out, sizeof(out), "cinfo.txt");
	ret = tu_sh("%s compress-info %s >%s 2>&1", tu_bin(bin, sizeof(bin), "zlfs-ctl"), at(name),
		    out);
	if (ret)
		return ret;
	f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	kv = strstr(line, ": size=");
	ck_assert_ptr_nonnull(kv);
	ck_assert_int_eq(sscanf(kv, ": size=%llu stored_blocks=%llu stored_bytes=%*u ratio=%*f "
				    "compressed=%7s cluster_blocks=%u alg=%7s",
				&ci->size, &ci->blocks, ci->compressed, &ci->cluster, ci->alg), 5);
	return 0;
}

/* The mount's compression figures against what st_blocks and compress-info say: a write of
 * whole text clusters counts them before and after compression, random ones as raw; a plain
 * file counts nothing; the figures are this mount's (a remount starts them at 0). */
START_TEST(t_accounting)
{
	long before, after, comp, raw, alone;
	struct cinfo ci;
	int fd, flags = 0;

	fresh("--compress=zstd", 0);
	daemon_pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(daemon_pid, 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_before"), 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_after"), 0);
	put("text", 0, 8 * CB, 0, 8 * CB, 0);
	before = tu_ctl_stat(mnt, "bytes_before");
	after = tu_ctl_stat(mnt, "bytes_after");
	comp = tu_ctl_stat(mnt, "clusters_compressed");
	ck_assert_int_eq(before, 8 * CB);
	ck_assert_int_eq(after, stored("text"));
	ck_assert_int_lt(after, before / 2);
	ck_assert_int_eq(comp, 8);
	ck_assert_int_eq(compress_info("text", &ci), 0);
	ck_assert_uint_eq(ci.size, 8 * CB);
	ck_assert_uint_eq(ci.blocks * 4096, (unsigned long long)stored("text"));
	ck_assert_str_eq(ci.compressed, "yes");
	ck_assert_uint_eq(ci.cluster, 4);
	ck_assert_str_eq(ci.alg, "zstd");

	put("rand", 0, 4 * CB, 1, 4 * CB, 0); /* random: stored raw, before = after */
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_before"), before + 4 * CB);
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_after"), after + 4 * CB);
	ck_assert_int_eq(tu_ctl_stat(mnt, "clusters_raw"), 4);
	ck_assert_int_eq(tu_ctl_stat(mnt, "clusters_compressed"), comp);
	ck_assert_int_eq(compress_info("rand", &ci), 0);
	ck_assert_uint_eq(ci.blocks, 4 * CB / 4096);

	/* Part of a cluster at the end of file: held in memory (tailbuf.c), then stored whole
	 * once, compressed (the zeros past the end of file too), when the fsync writes it (or
	 * the release, which FUSE sends after close returns). No block is written alone. */
	put("small", 0, 100, 0, 100, 0);
	fd = open(at("small"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	alone = tu_ctl_stat(mnt, "blocks_written_alone");
	ck_assert_int_eq(alone, 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "clusters_compressed"), comp + 1);
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_before"), before + 5 * CB);
	ck_assert_int_eq(stored("small"), 4096);

	fd = open(at("plain"), O_WRONLY | O_CREAT, 0644); /* chattr -c while empty: plain */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
	close(fd);
	raw = tu_ctl_stat(mnt, "bytes_before");
	put("plain", 0, 64 << 10, 0, 64 << 10, 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_before"), raw);
	ck_assert_int_eq(compress_info("plain", &ci), 0);
	ck_assert_str_eq(ci.compressed, "no");
	ck_assert_uint_eq(ci.cluster, 0);
	ck_assert_str_eq(ci.alg, "none");
	ck_assert_uint_eq(ci.size, 64 << 10);
	ck_assert_uint_eq(ci.blocks * 4096, (unsigned long long)stored("plain"));
	ck_assert_int_ne(compress_info("missing", &ci), 0); /* a clear error, not a line */
	down();
	daemon_pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(daemon_pid, 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "bytes_before"), 0); /* this mount's */
	ck_assert_int_eq(compress_info("text", &ci), 0);      /* the file's, kept */
	ck_assert_uint_eq(ci.blocks * 4096, (unsigned long long)after);
	check_all();
	down();
	model_free();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("compress_fs");
	TCase *tc = tcase_create("compress_fs");

	if (tu_fuse_missing())
		return 77;
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_lz4);
	tcase_add_test(tc, t_zstd);
	tcase_add_test(tc, t_lz4_encrypted);
	tcase_add_test(tc, t_zstd_encrypted);
	tcase_add_test(tc, t_corrupt);
	tcase_add_test(tc, t_gc);
	tcase_add_test(tc, t_fsck_slots);
	tcase_add_test(tc, t_chattr);
	tcase_add_test(tc, t_parallel);
	tcase_add_test(tc, t_accounting);
	tcase_add_test(tc, t_policy);
	tcase_add_test(tc, t_readahead);
	compress_runs_cases(tc);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
