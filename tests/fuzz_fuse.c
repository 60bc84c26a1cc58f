/*
 * fuzz_fuse.c - the libfuse calls of the daemon's operations, answered in process, and a walk
 * of a filesystem through those operations (fuzz_fuse.h).
 *
 * Each request is a struct fuse_req of our own: the operation's reply is captured in it, and
 * a request answered twice or never is a defect (the kernel would wait for ever): it aborts,
 * so the fuzzer keeps the input. Lookup counts are kept as the kernel keeps them and given
 * back (forget) before the unmount, so orphans and their freeing are reached too.
 * May call: fuse_int.h (the operations table, zfuse_*), files.h, core.h, libc.
 */
#define FUSE_USE_VERSION 314
#include "fuzz_fuse.h"
#include "fuse_int.h"
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define WALK_MAX_INODES 300
#define WALK_MAX_NAMES 400    /* names kept per directory */
#define READ_CHUNK (64u * 1024)

struct fuse_req {
	struct zfuse *z;
	struct fuse_ctx ctx;
	const char *op;
	int replies;
	int err;
	struct fuse_entry_param e;
	struct stat attr;
	struct fuse_file_info fi;
	char *buf;
	size_t len;
};

/* ---- the libfuse calls the operations make ------------------------------------------------ */

static int replied(fuse_req_t req)
{
	if (++req->replies > 1) {
		fprintf(stderr, "fuzz_fuse: %s answered twice\n", req->op);
		abort();
	}
	return 0;
}

void *fuse_req_userdata(fuse_req_t req) { return req->z; }
const struct fuse_ctx *fuse_req_ctx(fuse_req_t req) { return &req->ctx; }
/* The fuzzer's caller is in no group but its own. */
int fuse_req_getgroups(fuse_req_t req, int size, gid_t list[])
{
	(void)req;
	(void)size;
	(void)list;
	return 0;
}

int fuse_reply_err(fuse_req_t req, int err)
{
	req->err = err;
	return replied(req);
}

void fuse_reply_none(fuse_req_t req) { replied(req); }

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	req->e = *e;
	return replied(req);
}

int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
		      const struct fuse_file_info *fi)
{
	req->e = *e;
	req->fi = *fi;
	return replied(req);
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr, double attr_timeout)
{
	(void)attr_timeout;
	req->attr = *attr;
	return replied(req);
}

int fuse_reply_readlink(fuse_req_t req, const char *link)
{
	req->len = strlen(link); /* an unterminated target shows here, under ASan */
	req->buf = strdup(link);
	return replied(req);
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	req->fi = *fi;
	return replied(req);
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
	req->len = count;
	return replied(req);
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	req->buf = malloc(size ? size : 1);
	if (req->buf && size)
		memcpy(req->buf, buf, size); /* every byte of the reply is read: ASan sees it */
	req->len = req->buf ? size : 0;
	return replied(req);
}

int fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf)
{
	(void)stbuf;
	return replied(req);
}

int fuse_reply_xattr(fuse_req_t req, size_t count)
{
	req->len = count;
	return replied(req);
}

int fuse_reply_ioctl(fuse_req_t req, int result, const void *buf, size_t size)
{
	(void)buf;
	req->err = result < 0 ? -result : 0;
	req->len = size;
	return replied(req);
}

int fuse_lowlevel_notify_inval_inode(struct fuse_session *se, fuse_ino_t ino, off_t off,
				     off_t len)
{
	(void)se;
	(void)ino;
	(void)off;
	(void)len;
	return 0;
}

/* Directory entries in a layout of our own (the walk reads them back): ino, next offset,
 * the lookup the entry carries (readdirplus), name length, name; 8-byte aligned. */
struct fz_dirent {
	uint64_t ino, off, nodeid;
	uint32_t namelen, type;
	char name[];
};

static size_t add_dirent(char *buf, size_t bufsize, const char *name, uint64_t ino,
			 uint32_t type, uint64_t nodeid, off_t off)
{
	size_t namelen = strlen(name), sz = (sizeof(struct fz_dirent) + namelen + 7) & ~(size_t)7;
	struct fz_dirent *d = (void *)buf;

	if (!buf || sz > bufsize)
		return sz;
	memset(buf, 0, sz);
	d->ino = ino;
	d->off = (uint64_t)off;
	d->nodeid = nodeid;
	d->namelen = (uint32_t)namelen;
	d->type = type;
	memcpy(d->name, name, namelen);
	return sz;
}

size_t fuse_add_direntry(fuse_req_t req, char *buf, size_t bufsize, const char *name,
			 const struct stat *stbuf, off_t off)
{
	(void)req;
	return add_dirent(buf, bufsize, name, stbuf->st_ino, stbuf->st_mode >> 12, 0, off);
}

size_t fuse_add_direntry_plus(fuse_req_t req, char *buf, size_t bufsize, const char *name,
			      const struct fuse_entry_param *e, off_t off)
{
	(void)req;
	return add_dirent(buf, bufsize, name, e->attr.st_ino, e->attr.st_mode >> 12, e->ino, off);
}

/* ---- requests ------------------------------------------------------------------------------ */

struct walk {
	struct zfuse *z;
	const struct fuse_lowlevel_ops *ops;
	struct held { fuse_ino_t ino; uint64_t n; } held[WALK_MAX_INODES * 4];
	unsigned nheld;
	fuse_ino_t dirs[WALK_MAX_INODES];
	unsigned ndirs;
	unsigned visited;
	unsigned long requests;
	/* names the changes may hit */
	struct target { fuse_ino_t parent, ino; char name[ZLFS_NAME_MAX + 1]; } files[32];
	unsigned nfiles;
	char *data;
};

static void req_init(struct walk *w, struct fuse_req *r, const char *op)
{
	memset(r, 0, sizeof(*r));
	r->z = w->z;
	r->op = op;
	w->requests++;
}

/* A request must be answered exactly once before its operation returns. */
static int req_done(struct fuse_req *r)
{
	if (r->replies != 1) {
		fprintf(stderr, "fuzz_fuse: %s returned without an answer\n", r->op);
		abort();
	}
	return -r->err;
}

static void req_free(struct fuse_req *r)
{
	free(r->buf);
	r->buf = NULL;
}

static void hold(struct walk *w, fuse_ino_t ino)
{
	unsigned i;

	if (!ino)
		return;
	for (i = 0; i < w->nheld && w->held[i].ino != ino; i++)
		;
	if (i == w->nheld) {
		if (w->nheld == sizeof(w->held) / sizeof(w->held[0]))
			return; /* never: the walk is bounded below this */
		w->held[w->nheld++] = (struct held){ino, 0};
	}
	w->held[i].n++;
}

static int do_lookup(struct walk *w, fuse_ino_t dir, const char *name, struct fuse_entry_param *e)
{
	struct fuse_req r;
	int ret;

	req_init(w, &r, "lookup");
	w->ops->lookup(&r, dir, name);
	ret = req_done(&r);
	if (!ret) {
		*e = r.e;
		hold(w, e->ino);
	}
	return ret;
}

/* Entries of one readdir or readdirplus reply: names into NAMES, lookups taken to HELD. */
static uint64_t parse_dirents(struct walk *w, const char *buf, size_t len, char (*names)[256],
			      unsigned *nnames, int plus)
{
	uint64_t next = 0;
	size_t pos = 0;

	while (pos + sizeof(struct fz_dirent) <= len) {
		const struct fz_dirent *d = (const void *)(buf + pos);

		if (d->namelen > ZLFS_NAME_MAX) {
			fprintf(stderr, "fuzz_fuse: readdir gave a name of %u bytes\n", d->namelen);
			abort();
		}
		if (plus)
			hold(w, d->nodeid);
		else if (*nnames < WALK_MAX_NAMES && !(d->namelen <= 2 && d->name[0] == '.' &&
						       (d->namelen == 1 || d->name[1] == '.')))
			snprintf(names[(*nnames)++], 256, "%.*s", (int)d->namelen, d->name);
		next = d->off;
		pos += (sizeof(struct fz_dirent) + d->namelen + 7) & ~(size_t)7;
	}
	return next;
}

static void list_dir(struct walk *w, fuse_ino_t dir, char (*names)[256], unsigned *nnames)
{
	struct fuse_file_info fi = {.flags = O_RDONLY};
	struct fuse_req r;

	req_init(w, &r, "opendir");
	w->ops->opendir(&r, dir, &fi);
	if (req_done(&r))
		return;
	for (int plus = 0; plus < 2; plus++) {
		uint64_t off = 0;

		for (int rounds = 0; rounds < 64; rounds++) {
			req_init(w, &r, plus ? "readdirplus" : "readdir");
			if (plus)
				w->ops->readdirplus(&r, dir, 4096, (off_t)off, &fi);
			else
				w->ops->readdir(&r, dir, 4096, (off_t)off, &fi);
			if (req_done(&r) || !r.len) {
				req_free(&r);
				break;
			}
			off = parse_dirents(w, r.buf, r.len, names, nnames, plus);
			req_free(&r);
		}
	}
}

static void read_xattrs(struct walk *w, fuse_ino_t ino)
{
	struct fuse_req r, g;
	size_t pos;

	req_init(w, &r, "listxattr");
	w->ops->listxattr(&r, ino, 0);
	req_done(&r);
	req_init(w, &r, "listxattr");
	w->ops->listxattr(&r, ino, 4096);
	if (!req_done(&r) && r.buf) {
		for (pos = 0; pos < r.len; pos += strnlen(r.buf + pos, r.len - pos) + 1) {
			char name[256];

			snprintf(name, sizeof(name), "%.*s", (int)strnlen(r.buf + pos, r.len - pos),
				 r.buf + pos);
			for (size_t size = 0; size <= 256; size += 256) {
				req_init(w, &g, "getxattr");
				w->ops->getxattr(&g, ino, name, size);
				req_done(&g);
				req_free(&g);
			}
		}
	}
	req_free(&r);
	req_init(w, &r, "getxattr");
	w->ops->getxattr(&r, ino, "user.fuzz", 4096);
	req_done(&r);
	req_free(&r);
}

static void read_file(struct walk *w, fuse_ino_t ino, uint64_t size)
{
	struct fuse_file_info fi = {.flags = O_RDONLY};
	const uint64_t at[] = {0, READ_CHUNK, size > 4096 ? size - 4096 : 0, size, 1u << 20,
			       (uint64_t)1 << 40};
	struct fuse_req r;

	req_init(w, &r, "open");
	w->ops->open(&r, ino, &fi);
	if (req_done(&r))
		return;
	fi = r.fi;
	for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		req_init(w, &r, "read");
		w->ops->read(&r, ino, READ_CHUNK, (off_t)(at[i] > INT64_MAX ? 0 : at[i]), &fi);
		req_done(&r);
		if (r.len > READ_CHUNK) {
			fprintf(stderr, "fuzz_fuse: read returned %zu bytes for %u\n", r.len,
				READ_CHUNK);
			abort();
		}
		req_free(&r);
	}
	req_init(w, &r, "release");
	w->ops->release(&r, ino, &fi);
	req_done(&r);
}

static void visit(struct walk *w, fuse_ino_t dir, const char *name)
{
	struct fuse_entry_param e;
	struct fuse_req r;

	if (w->visited >= WALK_MAX_INODES || do_lookup(w, dir, name, &e))
		return;
	w->visited++;
	req_init(w, &r, "getattr");
	w->ops->getattr(&r, e.ino, NULL);
	req_done(&r);
	if (S_ISDIR(e.attr.st_mode) && w->ndirs < WALK_MAX_INODES) {
		unsigned i;

		for (i = 0; i < w->ndirs && w->dirs[i] != e.ino; i++)
			;
		if (i == w->ndirs)
			w->dirs[w->ndirs++] = e.ino;
	} else if (S_ISLNK(e.attr.st_mode)) {
		req_init(w, &r, "readlink");
		w->ops->readlink(&r, e.ino);
		req_done(&r);
		req_free(&r);
	} else if (S_ISREG(e.attr.st_mode)) {
		read_file(w, e.ino, (uint64_t)e.attr.st_size);
		if (w->nfiles < sizeof(w->files) / sizeof(w->files[0])) {
			struct target *t = &w->files[w->nfiles++];

			t->parent = dir;
			t->ino = e.ino;
			snprintf(t->name, sizeof(t->name), "%.*s", (int)sizeof(t->name) - 1, name);
		}
	}
	read_xattrs(w, e.ino);
}

static void walk_tree(struct walk *w)
{
	static char names[WALK_MAX_NAMES][256];

	w->dirs[w->ndirs++] = FUSE_ROOT_ID;
	read_xattrs(w, FUSE_ROOT_ID);
	for (unsigned d = 0; d < w->ndirs && w->visited < WALK_MAX_INODES; d++) {
		unsigned n = 0;

		struct fuse_entry_param e;

		list_dir(w, w->dirs[d], names, &n);
		for (unsigned i = 0; i < n; i++)
			visit(w, w->dirs[d], names[i]);
		do_lookup(w, w->dirs[d], "fz-absent", &e); /* a name that is not there: every level */
	}
}

/* ---- changes --------------------------------------------------------------------------------- */

static int do_write(struct walk *w, fuse_ino_t ino, struct fuse_file_info *fi, size_t len,
		    uint64_t off)
{
	struct fuse_req r;

	req_init(w, &r, "write");
	w->ops->write(&r, ino, w->data, len, (off_t)off, fi);
	return req_done(&r);
}

/* Create, write and fsync a new file; keep it open, unlinked, when ORPHAN. */
static fuse_ino_t new_file(struct walk *w, fuse_ino_t dir, const char *name, int orphan)
{
	struct fuse_file_info fi = {.flags = O_RDWR | O_CREAT};
	struct fuse_req r;
	fuse_ino_t ino;

	req_init(w, &r, "create");
	w->ops->create(&r, dir, name, S_IFREG | 0644, &fi);
	if (req_done(&r))
		return 0;
	ino = r.e.ino;
	hold(w, ino);
	fi = r.fi;
	do_write(w, ino, &fi, 65536, 0);
	do_write(w, ino, &fi, 4096, 1u << 20);
	req_init(w, &r, "fsync");
	w->ops->fsync(&r, ino, 0, &fi);
	req_done(&r);
	if (orphan) {
		req_init(w, &r, "unlink");
		w->ops->unlink(&r, dir, name);
		req_done(&r);
	}
	req_init(w, &r, "release");
	w->ops->release(&r, ino, &fi);
	req_done(&r);
	return ino;
}

/* Change an existing file: writes at offsets the script picks, fsync, truncate, xattrs. */
static void change_file(struct walk *w, const struct target *t, unsigned char s)
{
	struct fuse_file_info fi = {.flags = O_RDWR};
	const uint64_t at[] = {0, 4096, 5u << 20, 123, (uint64_t)4 << 30, 8192};
	struct fuse_req r;
	struct stat st = {.st_size = (off_t)((s & 7) * 3000)};

	req_init(w, &r, "open");
	w->ops->open(&r, t->ino, &fi);
	if (req_done(&r))
		return;
	fi = r.fi;
	do_write(w, t->ino, &fi, 8192, at[s % 6]);
	req_init(w, &r, "fsync");
	w->ops->fsync(&r, t->ino, s & 1, &fi);
	req_done(&r);
	req_init(w, &r, "setattr");
	w->ops->setattr(&r, t->ino, &st, FUSE_SET_ATTR_SIZE, &fi);
	req_done(&r);
	req_init(w, &r, "fallocate");
	w->ops->fallocate(&r, t->ino, 0x02 | 0x01 /* PUNCH_HOLE | KEEP_SIZE */, 0, 4096, &fi);
	req_done(&r);
	req_init(w, &r, "release");
	w->ops->release(&r, t->ino, &fi);
	req_done(&r);
	req_init(w, &r, "setxattr");
	w->ops->setxattr(&r, t->ino, "user.fz", w->data, 100 + s, 0);
	req_done(&r);
	req_init(w, &r, "removexattr");
	w->ops->removexattr(&r, t->ino, "user.fuzz");
	req_done(&r);
}

static void make_changes(struct walk *w, const unsigned char *s, unsigned len)
{
	unsigned char k[4] = {len > 0 ? s[0] : 0, len > 1 ? s[1] : 1, len > 2 ? s[2] : 2,
			      len > 3 ? s[3] : 3};
	struct fuse_entry_param e;
	struct fuse_req r;
	fuse_ino_t dir = 0;

	new_file(w, FUSE_ROOT_ID, "fz-new", 0);
	new_file(w, FUSE_ROOT_ID, "fz-orphan", 1);
	req_init(w, &r, "mkdir");
	w->ops->mkdir(&r, FUSE_ROOT_ID, "fz-dir", 0755);
	if (!req_done(&r)) {
		dir = r.e.ino;
		hold(w, dir);
	}
	req_init(w, &r, "symlink");
	w->ops->symlink(&r, "a/target/of/some/length", FUSE_ROOT_ID, "fz-link");
	if (!req_done(&r)) {
		fuse_ino_t ino = r.e.ino;

		hold(w, ino);
		req_init(w, &r, "readlink");
		w->ops->readlink(&r, ino);
		req_done(&r);
		req_free(&r);
	}
	if (dir) {
		req_init(w, &r, "rename");
		w->ops->rename(&r, FUSE_ROOT_ID, "fz-new", dir, "moved", 0);
		req_done(&r);
	}
	if (w->nfiles) {
		const struct target *a = &w->files[k[0] % w->nfiles], *b = &w->files[k[1] % w->nfiles];
		const struct target *c = &w->files[k[2] % w->nfiles];

		change_file(w, a, k[3]);
		req_init(w, &r, "link");
		w->ops->link(&r, a->ino, FUSE_ROOT_ID, "fz-hard");
		if (!req_done(&r))
			hold(w, r.e.ino);
		req_init(w, &r, "rename");
		w->ops->rename(&r, b->parent, b->name, dir ? dir : FUSE_ROOT_ID, "fz-renamed", 0);
		req_done(&r);
		if (c != b) {
			req_init(w, &r, "unlink");
			w->ops->unlink(&r, c->parent, c->name);
			req_done(&r);
		}
	}
	if (dir && !do_lookup(w, dir, "moved", &e)) {
		req_init(w, &r, "rmdir");
		w->ops->rmdir(&r, FUSE_ROOT_ID, "fz-dir"); /* not empty: must say so */
		req_done(&r);
	}
	req_init(w, &r, "statfs");
	w->ops->statfs(&r, FUSE_ROOT_ID);
	req_done(&r);
	/* collection and a checkpoint over whatever the damage left */
	gc_foreground(w->z->fs);
	files_sync(w->z->fs);
}

static void forget_all(struct walk *w);

/* ---- building the base images ------------------------------------------------------------- */

static fuse_ino_t mk_dir(struct walk *w, fuse_ino_t parent, const char *name)
{
	struct fuse_req r;

	req_init(w, &r, "mkdir");
	w->ops->mkdir(&r, parent, name, 0755);
	if (req_done(&r))
		return 0;
	hold(w, r.e.ino);
	return r.e.ino;
}

/* A file of SIZE bytes of a pattern, written at AT, with an xattr naming it. */
static fuse_ino_t mk_file(struct walk *w, fuse_ino_t parent, const char *name, size_t size,
			  uint64_t at)
{
	struct fuse_file_info fi = {.flags = O_RDWR | O_CREAT};
	struct fuse_req r;
	fuse_ino_t ino;

	req_init(w, &r, "create");
	w->ops->create(&r, parent, name, S_IFREG | 0644, &fi);
	if (req_done(&r))
		return 0;
	ino = r.e.ino;
	fi = r.fi;
	hold(w, ino);
	for (size_t done = 0; done < size; done += 65536)
		do_write(w, ino, &fi, size - done < 65536 ? size - done : 65536, at + done);
	req_init(w, &r, "release");
	w->ops->release(&r, ino, &fi);
	req_done(&r);
	req_init(w, &r, "setxattr");
	w->ops->setxattr(&r, ino, "user.fuzz", name, strlen(name), 0);
	req_done(&r);
	return ino;
}

static void mk_symlink(struct walk *w, fuse_ino_t parent, const char *name, const char *target)
{
	struct fuse_req r;

	req_init(w, &r, "symlink");
	w->ops->symlink(&r, target, parent, name);
	if (!req_done(&r))
		hold(w, r.e.ino);
}

static struct walk *walk_new(struct zlfs_fs *fs)
{
	struct zlfs_ops_opts o = {.cp_interval = 0, .entry_timeout = 1, .attr_timeout = 1};
	struct walk *w = calloc(1, sizeof(*w));

	if (!w || !(w->data = malloc(65536)) || !(w->z = zfuse_new(fs, &o))) {
		if (w)
			free(w->data);
		free(w);
		return NULL;
	}
	for (int i = 0; i < 65536; i++)
		w->data[i] = (char)(i * 7 + i / 4096);
	w->ops = zlfs_fuse_ops();
	return w;
}

static int walk_end(struct walk *w)
{
	int ret;

	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "fuzz_fuse: %u inodes visited, %u files, %lu requests\n", w->visited,
			w->nfiles, w->requests);
	forget_all(w);
	ret = zfuse_destroy(w->z);
	free(w->data);
	free(w);
	return ret;
}

int fz_fuse_populate(struct zlfs_fs *fs, unsigned nfiles)
{
	struct walk *w = walk_new(fs);
	char name[64], target[600];
	fuse_ino_t d, sub, big;
	struct fuse_req r;

	if (!w)
		return -ENOMEM;
	d = mk_dir(w, FUSE_ROOT_ID, "dir");
	for (unsigned i = 0; d && i < nfiles; i++) {
		snprintf(name, sizeof(name), "file-with-a-longer-name-%02u", i);
		mk_file(w, d, name, (size_t)i * 517, 0);
	}
	sub = d ? mk_dir(w, d, "sub") : 0;
	if (sub)
		mk_file(w, sub, "deep", 9000, 0);
	/* past the inode's pointers: direct, indirect and double-indirect nodes, sparse */
	big = mk_file(w, FUSE_ROOT_ID, "big", 8192, 0);
	if (big) {
		struct fuse_file_info fi = {.flags = O_RDWR};

		req_init(w, &r, "open");
		w->ops->open(&r, big, &fi);
		if (!req_done(&r)) {
			fi = r.fi;
			do_write(w, big, &fi, 8192, (uint64_t)ZLFS_INODE_ADDRS * 4096);
			do_write(w, big, &fi, 4096, (uint64_t)3 << 30);
			req_init(w, &r, "release");
			w->ops->release(&r, big, &fi);
			req_done(&r);
		}
		req_init(w, &r, "link");
		w->ops->link(&r, big, FUSE_ROOT_ID, "big2");
		if (!req_done(&r))
			hold(w, r.e.ino);
		/* xattrs over several xattr nodes, and values in value nodes (XATTR_NODES) */
		for (int i = 0; i < 80; i++) {
			snprintf(name, sizeof(name), "user.attr-%02d", i);
			req_init(w, &r, "setxattr");
			w->ops->setxattr(&r, big, name, w->data, 150, 0);
			req_done(&r);
		}
		for (int i = 0; i < 2; i++) {
			snprintf(name, sizeof(name), "user.value-%d", i);
			req_init(w, &r, "setxattr");
			w->ops->setxattr(&r, big, name, w->data, i ? 65536 : 5000, 0);
			req_done(&r);
		}
	}
	mk_symlink(w, FUSE_ROOT_ID, "link", "dir/sub/deep");
	memset(target, 'x', sizeof(target) - 1);
	target[sizeof(target) - 1] = 0;
	mk_symlink(w, FUSE_ROOT_ID, "longlink", target);
	return walk_end(w);
}

void fz_fuse_crash_work(struct zlfs_fs *fs)
{
	struct walk *w = walk_new(fs);
	struct fuse_entry_param e;
	struct fuse_req r;

	if (!w)
		return;
	new_file(w, FUSE_ROOT_ID, "orphan", 1); /* held open by the "kernel", unlinked */
	files_sync(fs);                          /* a checkpoint that lists the orphan */
	new_file(w, FUSE_ROOT_ID, "rolled", 0);  /* fsync'ed after it: roll-forward work */
	if (!do_lookup(w, FUSE_ROOT_ID, "big", &e)) {
		struct fuse_file_info fi = {.flags = O_RDWR};

		req_init(w, &r, "open");
		w->ops->open(&r, e.ino, &fi);
		if (!req_done(&r)) {
			fi = r.fi;
			do_write(w, e.ino, &fi, 12288, 4096);
			req_init(w, &r, "fsync");
			w->ops->fsync(&r, e.ino, 0, &fi);
			req_done(&r);
		}
	}
	/* the caller dies here, as a killed daemon would: nothing is released */
}

static void forget_all(struct walk *w)
{
	for (unsigned i = 0; i < w->nheld; i++) {
		struct fuse_req r;

		req_init(w, &r, "forget");
		w->ops->forget(&r, w->held[i].ino, w->held[i].n);
		req_done(&r);
	}
	w->nheld = 0;
}

int fz_fuse_walk(struct zlfs_fs *fs, int write, const unsigned char *script, unsigned len)
{
	struct walk *w = walk_new(fs);

	if (!w)
		return files_unmount(fs);
	/* no zfuse_start: no timer thread, so every checkpoint is written by a request */
	walk_tree(w);
	if (write)
		make_changes(w, script, len);
	return walk_end(w);
}
