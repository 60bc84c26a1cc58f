/*
 * posix_manifest.c - a manifest of a tree: one line per entry with every attribute that must
 * survive a remount (or a copy by cp -a / tar), content and xattr hashes included, and a
 * check of each directory's link count and "." / ".." on the way.
 */
#include "posix_testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

static struct mf *g_mf;

static uint64_t hash_fd(int fd, off_t size)
{
	XXH3_state_t *s = XXH3_createState();
	size_t bufsz = 1 << 20;
	char *buf = malloc(bufsz);
	uint64_t h;
	off_t pos = 0, step = 1 << 20;
	ssize_t n;

	XXH3_64bits_reset(s);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	/* Files over 64 MiB (sparse ones): 1 MiB samples at 32 places, not every hole. */
	if (size > (64 << 20))
		step = size / 32;
	while (pos < size && (n = pread(fd, buf, bufsz, pos)) > 0) {
		XXH3_64bits_update(s, buf, (size_t)n);
		pos += step > n ? n : step;
	}
	XXH3_64bits_update(s, &pos, sizeof(pos));
	h = XXH3_64bits_digest(s);
	XXH3_freeState(s);
	free(buf);
	return h;
}

/* "name=hash;" for every xattr, sorted by name. */
static void xattr_sig(const char *path, char *out, size_t outlen)
{
	char list[8192], *names[256], val[65536];
	ssize_t n = llistxattr(path, list, sizeof(list)), off = 0;
	int cnt = 0, i, j;

	out[0] = 0;
	if (n <= 0)
		return;
	while (off < n && cnt < 256) {
		names[cnt++] = list + off;
		off += (ssize_t)strlen(list + off) + 1;
	}
	for (i = 1; i < cnt; i++)
		for (j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (i = 0; i < cnt; i++) {
		ssize_t vl = lgetxattr(path, names[i], val, sizeof(val));
		size_t used = strlen(out);

		snprintf(out + used, outlen - used, "%s=%zd:%016" PRIx64 ";", names[i], vl,
			 vl >= 0 ? (uint64_t)XXH3_64bits(val, (size_t)vl) : 0);
	}
}

/* Subdirectories of PATH, and the inode numbers readdir gives for "." and "..". */
size_t subdirs(const char *path, ino_t *dot, ino_t *dotdot)
{
	DIR *d = opendir(path);
	struct dirent *e;
	size_t n = 0;

	*dot = *dotdot = 0;
	if (!d)
		return 0;
	while ((e = rd_next(d))) {
		if (!strcmp(e->d_name, "."))
			*dot = e->d_ino;
		else if (!strcmp(e->d_name, ".."))
			*dotdot = e->d_ino;
		else if (e->d_type == DT_DIR)
			n++;
	}
	closedir(d);
	return n;
}

/* A directory's link count is 2 + subdirectories, and readdir's "." and ".." name itself
 * and its parent (the parent pointer a rename must move). */
static int dir_consistent(const char *path, const struct stat *st, int is_root)
{
	char up[PATH_MAX + 4];
	ino_t dot, dotdot;
	size_t n = subdirs(path, &dot, &dotdot);
	struct stat pst;

	snprintf(up, sizeof(up), "%s/..", path);
	if (st->st_nlink != 2 + n || dot != st->st_ino ||
	    (!is_root && (lstat(up, &pst) || dotdot != pst.st_ino))) {
		fprintf(stderr, "%s: nlink %lu, %zu subdirectories, . is %lu, .. is %lu\n", path,
			(unsigned long)st->st_nlink, n, (unsigned long)dot, (unsigned long)dotdot);
		return 0;
	}
	return 1;
}

static int mf_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	struct mf *m = g_mf;
	const char *rel = path + strlen(m->root);
	char content[64] = "-", xs[4096], line[8192];
	int fd;

	(void)flag;
	(void)ftw;
	if (S_ISREG(st->st_mode) && (fd = open(path, O_RDONLY)) >= 0) {
		snprintf(content, sizeof(content), "%016" PRIx64, hash_fd(fd, st->st_size));
		close(fd);
	} else if (S_ISLNK(st->st_mode)) {
		char t[PATH_MAX + 1];
		ssize_t n = readlink(path, t, sizeof(t));

		snprintf(content, sizeof(content), "L%zd:%016" PRIx64, n,
			 n >= 0 ? (uint64_t)XXH3_64bits(t, (size_t)n) : 0);
	}
	if (S_ISDIR(st->st_mode) && !dir_consistent(path, st, !*rel))
		m->bad_dirs++;
	xattr_sig(path, xs, sizeof(xs));
	if (m->mode == MF_ALL)
		snprintf(line, sizeof(line),
			 "%s|%o|%u|%u|%lu|%lld|%lld|%llx|ino %llu|a%" PRIu64 "|m%" PRIu64
			 "|c%" PRIu64 "|%s|%s",
			 *rel ? rel : "/", st->st_mode, st->st_uid, st->st_gid,
			 (unsigned long)st->st_nlink, (long long)st->st_size,
			 (long long)st->st_blocks, (unsigned long long)st->st_rdev,
			 (unsigned long long)st->st_ino, ts_ns(st->st_atim), ts_ns(st->st_mtim),
			 ts_ns(st->st_ctim), content, xs);
	else /* what cp -a / tar -xp must reproduce */
		snprintf(line, sizeof(line), "%s|%o|%u|%u|%lu|%lld|%llx|m%" PRIu64 "|%s|%s",
			 *rel ? rel : "/", st->st_mode, st->st_uid, st->st_gid,
			 S_ISDIR(st->st_mode) ? 0ul : (unsigned long)st->st_nlink,
			 S_ISDIR(st->st_mode) ? 0ll : (long long)st->st_size,
			 (unsigned long long)st->st_rdev, ts_ns(st->st_mtim), content, xs);
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 1024;
		m->lines = realloc(m->lines, m->cap * sizeof(*m->lines));
	}
	m->lines[m->n++] = strdup(line);
	return 0;
}

int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct mf *manifest(const char *root, int mode)
{
	struct mf *m = calloc(1, sizeof(*m));

	m->root = root;
	m->mode = mode;
	g_mf = m;
	ck_assert_int_eq(nftw(root, mf_visit, 64, FTW_PHYS), 0);
	g_mf = NULL;
	qsort(m->lines, m->n, sizeof(*m->lines), cmp_str);
	return m;
}

void mf_free(struct mf *m)
{
	size_t i;

	for (i = 0; m && i < m->n; i++)
		free(m->lines[i]);
	if (m)
		free(m->lines);
	free(m);
}

/* Number of lines that differ; the first few are printed. */
size_t mf_diff(const struct mf *a, const struct mf *b, const char *what)
{
	size_t i = 0, j = 0, bad = 0;

	while (i < a->n || j < b->n) {
		int c = i == a->n ? 1 : j == b->n ? -1 : strcmp(a->lines[i], b->lines[j]);

		if (!c) {
			i++, j++;
			continue;
		}
		if (bad++ < 12)
			fprintf(stderr, "%s %s: %s\n", what, c < 0 ? "only before" : "only after",
				c < 0 ? a->lines[i] : b->lines[j]);
		if (c < 0)
			i++;
		else
			j++;
	}
	return bad;
}
