/*
 * sload.c - mkfs.zlfs --root-dir: a new filesystem filled with a host directory's tree, offline
 * (as sload.f2fs and mkfs.btrfs --rootdir).
 *
 * Owns: walking the host tree (names in sorted order, so the same tree makes the same image),
 * copying what each entry is - owner, mode, times (or one fixed time), xattrs, data with its
 * holes, symlink targets, device numbers - and keeping hard links linked.
 * May call: files.h (the file layer, on a filesystem mounted in this process), log.h.
 *
 * The tree goes in through the same file layer the daemon uses, one entry at a time, with
 * checkpoints when enough has changed (ckpt_due, as the daemon's checkpoint thread): so names,
 * inline data, encryption and xattrs are written exactly as a mounted filesystem writes them,
 * each file's data in one run of its log and a directory's new inodes together - the layout a
 * filesystem settles into, not one GC must first rearrange. Nothing else runs in the process:
 * no background GC, no second writer, so the same input writes the same blocks in the same
 * order. A host error (an unreadable file, an xattr zlfs cannot hold) stops the load with the
 * path and the reason: an image that silently lacks part of its tree is worse than none.
 */
#include "files.h"
#include "log.h"
#include "sload.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define COPY_CHUNK (1u << 20)

/* A host inode with more than one name, and the inode it became. */
struct hlink {
	dev_t dev;
	ino_t ino;
	uint32_t zino;
};

struct sload {
	struct zlfs_fs *fs;
	const struct sload_opts *o;
	struct sload_stats *st;
	void *links;            /* tsearch tree of struct hlink */
	char path[PATH_MAX];    /* the host path of the entry at hand */
	size_t plen;
	uint8_t *buf;           /* COPY_CHUNK bytes: file data, then xattr lists and values */
	char *xbuf;
};

static int fail(struct sload *s, int ret, const char *what)
{
	zlog_err("%s: %s: %s", s->path, what, strerror(-ret));
	return ret;
}

static int hlink_cmp(const void *a, const void *b)
{
	const struct hlink *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

/* The host's times, or the fixed one; set last, after everything that touches them. */
static void set_times(struct sload *s, struct node_page *np, const struct stat *st)
{
	struct zlfs_inode *in = inode_of(np);

	if (s->o->fixed_time) {
		in->atime_ns = in->mtime_ns = in->ctime_ns = in->crtime_ns =
			le64_put((uint64_t)s->o->time_ns);
	} else {
		in->atime_ns = le64_put((uint64_t)ts_ns(&st->st_atim));
		in->mtime_ns = le64_put((uint64_t)ts_ns(&st->st_mtim));
		in->ctime_ns = le64_put((uint64_t)ts_ns(&st->st_ctim));
	}
	node_dirty(s->fs, np);
}

static int set_times_of(struct sload *s, uint32_t ino, const struct stat *st)
{
	struct node_page *np;
	int ret = inode_get(s->fs, ino, &np);

	if (ret)
		return fail(s, ret, "reading back its inode");
	set_times(s, np, st);
	node_put(s->fs, np);
	return 0;
}

/* Every xattr of the host entry, in the order the host lists them. */
static int copy_xattrs(struct sload *s, struct node_page *np)
{
	ssize_t len = llistxattr(s->path, s->xbuf, XATTR_SIZE_MAX);
	char *name;

	if (len < 0 && (errno == ENOTSUP || errno == ENOSYS))
		return 0; /* a host filesystem without xattrs: there are none to copy */
	if (len < 0)
		return fail(s, -errno, "listing xattrs");
	for (name = s->xbuf; name < s->xbuf + len; name += strlen(name) + 1) {
		ssize_t vlen = lgetxattr(s->path, name, s->buf, COPY_CHUNK);
		int which, ret;

		if (vlen < 0)
			return fail(s, -errno, name);
		/* An ACL goes the way setfacl's does (acl.c): checked, the mode kept in step, the
		 * POSIX_ACL feature turned on. */
		which = acl_name(name);
		ret = which ? acl_set(s->fs, np, which, s->buf, (size_t)vlen, 0)
			    : xattr_set(s->fs, np, name, s->buf, (size_t)vlen, 0);
		if (ret) {
			zlog_err("%s: xattr %s (%zd bytes): %s", s->path, name, vlen,
				 ret == -EOPNOTSUPP || ret == -ENODATA
					 ? "zlfs holds user., trusted., security. xattrs and POSIX "
					   "ACLs only"
				 : ret == -ENOSPC || ret == -E2BIG
					 ? "more xattrs than this filesystem holds"
					 : strerror(-ret));
			return ret;
		}
		s->st->xattrs++;
	}
	return 0;
}

/* LEN bytes of the buffer at OFF, as the FUSE write does: in the inode while it fits. */
static int write_all(struct sload *s, struct node_page *np, size_t len, uint64_t off)
{
	size_t done = 0;
	int ret = 0;

	while (done < len) {
		ret = inline_try_write(s->fs, np, s->buf + done, len - done, off + done);
		if (!ret)
			ret = data_write(s->fs, np, s->buf + done, len - done, off + done);
		if (ret <= 0)
			return ret ? ret : -EIO;
		done += (size_t)ret;
	}
	return 0;
}

/* The file's data extents (SEEK_DATA), so holes stay holes; then its size. */
static int copy_data(struct sload *s, struct node_page *np, const struct stat *st)
{
	int fd = open(s->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), ret = 0;
	off_t off = 0, end = st->st_size;

	if (fd < 0)
		return fail(s, -errno, "opening it");
	while (!ret && off < end) {
		off_t data = lseek(fd, off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (data < 0) { /* no SEEK_DATA here: read it all */
			data = off;
			hole = end;
		} else {
			hole = lseek(fd, data, SEEK_HOLE);
			if (hole < 0 || hole > end)
				hole = end;
		}
		for (off = data; !ret && off < hole;) {
			size_t want = hole - off < COPY_CHUNK ? (size_t)(hole - off) : COPY_CHUNK;
			ssize_t n = pread(fd, s->buf, want, off);

			if (n <= 0) {
				ret = fail(s, n < 0 ? -errno : -EIO, n < 0 ? "reading it"
									   : "it shrank while read");
				break;
			}
			ret = write_all(s, np, (size_t)n, (uint64_t)off);
			if (ret)
				ret = fail(s, ret, "writing its data");
			off += n;
			s->st->bytes += (uint64_t)n;
		}
	}
	close(fd);
	if (!ret && le64_get(inode_of(np)->size) != (uint64_t)end) {
		ret = data_set_size(s->fs, np, (uint64_t)end);
		if (ret)
			ret = fail(s, ret, "setting its size");
	}
	return ret;
}

/* A new inode for the host entry ST, named NAME in directory DIR_INO. */
static int make_once(struct sload *s, uint32_t dir_ino, const char *name, const struct stat *st,
		     const char *target, struct node_page **out)
{
	uint32_t mode = st->st_mode, rdev = 0, ino;
	struct node_page *dir, *np;
	int ret = inode_get(s->fs, dir_ino, &dir);

	if (ret)
		return ret;
	if (S_ISCHR(mode) || S_ISBLK(mode)) /* as the FUSE mknod stores it */
		rdev = (uint32_t)st->st_rdev;
	ret = inode_new(s->fs, mode, st->st_uid, st->st_gid, rdev, dir_ino, &np);
	if (ret) {
		node_put(s->fs, dir);
		return ret;
	}
	ino = np->nid;
	ret = fcrypt_inherit(s->fs, dir, np);
	if (!ret)
		inline_start(s->fs, np);
	if (!ret && target)
		ret = symlink_store(s->fs, np, target);
	if (!ret)
		ret = dir_add(s->fs, dir, name, strlen(name), ino, (uint8_t)IFTODT(mode));
	if (!ret && S_ISDIR(mode)) {
		inode_of(dir)->nlink = le32_put(le32_get(inode_of(dir)->nlink) + 1);
		node_dirty(s->fs, dir);
	}
	node_put(s->fs, dir);
	if (ret) {
		node_put(s->fs, np);
		inode_free(s->fs, ino);
		return ret;
	}
	*out = np;
	return 0;
}

/* -EAGAIN: only node ids freed since the last checkpoint were left; one frees them. */
static int make(struct sload *s, uint32_t dir_ino, const char *name, const struct stat *st,
		const char *target, struct node_page **out)
{
	int ret = make_once(s, dir_ino, name, st, target, out);

	if (ret == -EAGAIN && !(ret = files_sync(s->fs)))
		ret = make_once(s, dir_ino, name, st, target, out);
	return ret ? fail(s, ret, "creating it") : 0;
}

/* A further name of a host inode already copied: 1 when linked, 0 when it is the first. */
static int link_again(struct sload *s, uint32_t dir_ino, const char *name, const struct stat *st)
{
	struct hlink key = {.dev = st->st_dev, .ino = st->st_ino}, **found;
	struct node_page *dir, *np;
	int ret;

	found = tfind(&key, &s->links, hlink_cmp);
	if (!found)
		return 0;
	ret = inode_get(s->fs, dir_ino, &dir);
	if (ret)
		return fail(s, ret, "reading its directory");
	ret = inode_get(s->fs, (*found)->zino, &np);
	if (!ret) {
		ret = fcrypt_same_policy(dir, np) ? 0 : -EXDEV;
		if (!ret)
			ret = dir_add(s->fs, dir, name, strlen(name), np->nid,
				      (uint8_t)IFTODT(st->st_mode));
		if (!ret) { /* the host's times were set with the first name; ctime stays */
			inode_of(np)->nlink = le32_put(le32_get(inode_of(np)->nlink) + 1);
			node_dirty(s->fs, np);
		}
		node_put(s->fs, np);
	}
	node_put(s->fs, dir);
	if (ret)
		return fail(s, ret, "linking it");
	s->st->hardlinks++;
	return 1;
}

static int remember_link(struct sload *s, const struct stat *st, uint32_t zino)
{
	struct hlink *h = malloc(sizeof(*h));

	if (h)
		*h = (struct hlink){.dev = st->st_dev, .ino = st->st_ino, .zino = zino};
	if (!h || !tsearch(h, &s->links, hlink_cmp)) {
		free(h);
		return fail(s, -ENOMEM, "remembering its hard links");
	}
	return 0;
}

static int load_dir(struct sload *s, uint32_t dir_ino);

/* One entry NAME of directory DIR_INO, at s->path. */
static int load_entry(struct sload *s, uint32_t dir_ino, const char *name)
{
	char target[PATH_MAX];
	struct node_page *np;
	struct stat st;
	uint32_t ino;
	int ret;

	if (lstat(s->path, &st))
		return fail(s, -errno, "stat");
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		ret = link_again(s, dir_ino, name, &st);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(s->path, target, sizeof(target) - 1);

		if (n < 0)
			return fail(s, -errno, "readlink");
		target[n] = 0;
	}
	ret = make(s, dir_ino, name, &st, S_ISLNK(st.st_mode) ? target : NULL, &np);
	if (ret)
		return ret;
	ino = np->nid;
	if (S_ISREG(st.st_mode))
		ret = copy_data(s, np, &st);
	if (!ret)
		ret = copy_xattrs(s, np);
	if (!ret && !S_ISDIR(st.st_mode))
		set_times(s, np, &st);
	node_put(s->fs, np);
	if (!ret && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
		ret = remember_link(s, &st, ino);
	if (S_ISREG(st.st_mode))
		data_lane_release(s->fs, ino); /* closed: the next file starts on the first lane */
	if (ret)
		return ret;
	if (S_ISDIR(st.st_mode)) {
		s->st->dirs++;
		ret = load_dir(s, ino);
		/* after its entries, which changed its times */
		return ret ? ret : set_times_of(s, ino, &st);
	}
	if (S_ISREG(st.st_mode))
		s->st->files++;
	else if (S_ISLNK(st.st_mode))
		s->st->symlinks++;
	else
		s->st->specials++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in s->path, sorted: readdir's order is the host's, not the tree's. */
static int read_names(struct sload *s, char ***out, size_t *count)
{
	DIR *d = opendir(s->path);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	if (!d)
		return fail(s, -errno, "opening the directory");
	while (!ret && (errno = 0, e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			char **m = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*m));

			if (!m) {
				ret = -ENOMEM;
				break;
			}
			names = m;
		}
		if (!(names[n] = strdup(e->d_name)))
			ret = -ENOMEM;
		else
			n++;
	}
	if (!ret && errno)
		ret = -errno;
	closedir(d);
	if (ret) {
		while (n)
			free(names[--n]);
		free(names);
		return fail(s, ret, "reading the directory");
	}
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	*out = names;
	*count = n;
	return 0;
}

static int load_dir(struct sload *s, uint32_t dir_ino)
{
	size_t plen = s->plen, n = 0, i;
	char **names = NULL;
	int ret = read_names(s, &names, &n);

	for (i = 0; !ret && i < n; i++) {
		size_t len = strlen(names[i]);

		if (plen + 1 + len >= sizeof(s->path)) {
			ret = fail(s, -ENAMETOOLONG, names[i]);
			break;
		}
		s->path[plen] = '/';
		memcpy(s->path + plen + 1, names[i], len + 1);
		s->plen = plen + 1 + len;
		ret = load_entry(s, dir_ino, names[i]);
		if (!ret && ckpt_due(s->fs)) /* as the daemon's checkpoint thread: memory bounded */
			ret = files_sync(s->fs);
		s->path[plen] = 0;
		s->plen = plen;
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

/* The root directory takes the host directory's mode, owner and xattrs; times last. */
static int load_root(struct sload *s, const struct stat *st)
{
	struct node_page *np;
	int ret = inode_get(s->fs, ZLFS_ROOT_INO, &np);

	if (ret)
		return fail(s, ret, "reading the root directory");
	inode_of(np)->mode = le32_put(S_IFDIR | (st->st_mode & 07777));
	inode_of(np)->uid = le32_put(st->st_uid);
	inode_of(np)->gid = le32_put(st->st_gid);
	node_dirty(s->fs, np);
	ret = copy_xattrs(s, np);
	node_put(s->fs, np);
	if (!ret)
		ret = load_dir(s, ZLFS_ROOT_INO);
	return ret ? ret : set_times_of(s, ZLFS_ROOT_INO, st);
}

int sload_tree(struct zlfs_fs *fs, const struct sload_opts *o, struct sload_stats *st)
{
	struct sload s = {.fs = fs, .o = o, .st = st};
	struct stat rst;
	int ret;

	memset(st, 0, sizeof(*st));
	s.plen = strlen(o->root);
	while (s.plen > 1 && o->root[s.plen - 1] == '/')
		s.plen--;
	if (s.plen >= sizeof(s.path))
		return -ENAMETOOLONG;
	memcpy(s.path, o->root, s.plen);
	if (stat(s.path, &rst))
		return fail(&s, -errno, "stat");
	if (!S_ISDIR(rst.st_mode))
		return fail(&s, -ENOTDIR, "--root-dir");
	s.buf = malloc(COPY_CHUNK);
	s.xbuf = malloc(XATTR_SIZE_MAX);
	ret = s.buf && s.xbuf ? load_root(&s, &rst) : -ENOMEM;
	if (s.links)
		tdestroy(s.links, free);
	free(s.buf);
	free(s.xbuf);
	return ret;
}
