/*
 * dmark.c - dentry marks: the names an fsync makes durable without a checkpoint.
 *
 * Owns: what changed in each directory's names since the last checkpoint, whether a regular
 * file made since then still has its one first name (so that its fsync may write a dentry
 * mark instead of a checkpoint: node_fsync), and whether every change in a directory is
 * covered by a durable mark (so that the directory's fsync needs nothing). files.c links the
 * marks recovery found.
 * May call: dir_cache.c (dcache, dir_int.h), fcrypt.c, node (core.h).
 *
 * Locks: the records are under the directory cache's lock (a leaf: nothing is called while
 * it is held); they are read and changed by holders of cp_lock shared, so the checkpoint
 * version they are kept for (epoch) holds still meanwhile: a checkpoint writes every
 * directory block, so the records of an older epoch say nothing and are dropped.
 */
#include "dir_int.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DM_BUCKETS 256
#define DM_FILES_MAX 4096 /* files tracked per epoch; more fsync through a checkpoint */
#define DM_NAMES_MAX 64   /* names tracked per directory; more make it need a checkpoint */

/* A regular file made since the last checkpoint. */
struct dm_file {
	struct dm_file *next;
	uint32_t ino, dir;
	uint8_t live;    /* its only name is still NAME in DIR, as made */
	uint8_t durable; /* a dentry mark saying so is on the device */
	uint16_t len;
	char name[ZLFS_NAME_MAX + 1];
};

/* A name of a directory changed since the last checkpoint. */
struct dm_name {
	struct dm_name *next;
	uint32_t ino;        /* what it names now, 0: nothing */
	uint32_t was;        /* what it named at the checkpoint (its first change's), 0: nothing */
	uint8_t marked;      /* a durable dentry mark named it: recovery may link it again */
	uint16_t len;
	char name[ZLFS_NAME_MAX + 1];
};

struct dm_dir {
	struct dm_dir *next;
	uint32_t ino;
	uint8_t bad;         /* a change no mark covers: its fsync needs a checkpoint */
	uint8_t dir_gone;    /* a directory entry left it: a name may have been a directory's */
	uint32_t nnames;
	struct dm_name *names;
};

/* An inode the checkpoint has that was given a name since (a rename or a link). */
struct dm_moved {
	struct dm_moved *next;
	uint32_t ino;
};

struct dmtab {
	uint64_t epoch;
	uint32_t nfiles, nmoved;
	uint8_t moved_lost; /* out of memory: an inode given a name is not in moved[] */
	struct dm_file *files[DM_BUCKETS];
	struct dm_dir *dirs[DM_BUCKETS];
	struct dm_moved *moved[DM_BUCKETS];
};

static void dm_names_free(struct dm_dir *d)
{
	while (d->names) {
		struct dm_name *n = d->names;

		d->names = n->next;
		free(n);
	}
	d->nnames = 0;
}

static void dm_clear(struct dmtab *t)
{
	for (uint32_t b = 0; b < DM_BUCKETS; b++) {
		while (t->files[b]) {
			struct dm_file *f = t->files[b];

			t->files[b] = f->next;
			free(f);
		}
		while (t->dirs[b]) {
			struct dm_dir *d = t->dirs[b];

			t->dirs[b] = d->next;
			dm_names_free(d);
			free(d);
		}
		while (t->moved[b]) {
			struct dm_moved *m = t->moved[b];

			t->moved[b] = m->next;
			free(m);
		}
	}
	t->nfiles = t->nmoved = 0;
	t->moved_lost = 0;
}

void dmark_destroy(struct zlfs_fs *fs)
{
	struct dir_cache *dc = fs->dcache;

	if (!dc || !dc->dm)
		return;
	dm_clear(dc->dm);
	free(dc->dm);
	dc->dm = NULL;
}

/* The records of this epoch, under dc->lock; NULL when out of memory. */
static struct dmtab *dm_tab(struct zlfs_fs *fs, struct dir_cache *dc)
{
	if (!dc->dm)
		dc->dm = calloc(1, sizeof(*dc->dm));
	if (dc->dm && dc->dm->epoch != fs->cp_ver) {
		dm_clear(dc->dm);
		dc->dm->epoch = fs->cp_ver;
	}
	return dc->dm;
}

static struct dm_file *dm_file(struct dmtab *t, uint32_t ino)
{
	struct dm_file *f = t->files[ino % DM_BUCKETS];

	while (f && f->ino != ino)
		f = f->next;
	return f;
}

static int dm_moved_has(const struct dmtab *t, uint32_t ino)
{
	const struct dm_moved *m = t->moved[ino % DM_BUCKETS];

	while (m && m->ino != ino)
		m = m->next;
	return m != NULL;
}

static void dm_moved_add(struct dmtab *t, uint32_t ino)
{
	struct dm_moved *m;

	if (dm_moved_has(t, ino))
		return;
	if (!(m = calloc(1, sizeof(*m)))) {
		t->moved_lost = 1;
		return;
	}
	m->ino = ino;
	m->next = t->moved[ino % DM_BUCKETS];
	t->moved[ino % DM_BUCKETS] = m;
	t->nmoved++;
}

static struct dm_dir *dm_dir(struct dmtab *t, uint32_t ino, int make)
{
	struct dm_dir *d = t->dirs[ino % DM_BUCKETS];

	while (d && d->ino != ino)
		d = d->next;
	if (!d && make && (d = calloc(1, sizeof(*d)))) {
		d->ino = ino;
		d->next = t->dirs[ino % DM_BUCKETS];
		t->dirs[ino % DM_BUCKETS] = d;
	}
	return d;
}

static struct dm_name *dm_name(struct dm_dir *d, const char *name, size_t len, int make)
{
	struct dm_name *n;

	for (n = d->names; n; n = n->next)
		if (n->len == len && !memcmp(n->name, name, len))
			return n;
	if (!make || d->nnames >= DM_NAMES_MAX || !(n = calloc(1, sizeof(*n))))
		return NULL;
	n->len = (uint16_t)len;
	memcpy(n->name, name, len);
	n->next = d->names;
	d->names = n;
	d->nnames++;
	return n;
}

/* The name change OLD -> NEW (inode numbers, 0: none) of NAME in directory DIR; 0 when out of
 * memory for DIR's record. */
static int dm_note_locked(struct dmtab *t, uint32_t dir, const char *name, size_t len,
			   uint32_t old, uint8_t otype, uint32_t new, uint8_t ntype, int fresh,
			   int plain)
{
	struct dm_dir *d = dm_dir(t, dir, 1);
	struct dm_file *f;
	struct dm_name *n;

	if (old && (f = dm_file(t, old)))
		f->live = 0; /* the name it was made with is gone */
	if (new && (f = dm_file(t, new)))
		f->live = 0; /* a second name, or a new one: no mark can say it */
	else if (new && !old && fresh && ntype == DT_REG && plain && d &&
		 t->nfiles < DM_FILES_MAX && (f = calloc(1, sizeof(*f)))) {
		f->ino = new;
		f->dir = dir;
		f->live = 1;
		f->len = (uint16_t)len;
		memcpy(f->name, name, len);
		f->next = t->files[new % DM_BUCKETS];
		t->files[new % DM_BUCKETS] = f;
		t->nfiles++;
	}
	if (!d)
		return 0;
	if (old && otype == DT_DIR)
		d->dir_gone = 1;
	if (d->bad || !plain || (old && otype != DT_REG) || (new && ntype != DT_REG)) {
		d->bad = 1;
		return 1;
	}
	n = dm_name(d, name, len, 0);
	if (!n && (n = dm_name(d, name, len, 1))) /* its first change says what it was */
		n->was = old;
	if (!n) {
		d->bad = 1;
		dm_names_free(d);
		return 1;
	}
	n->ino = new;
	return 1;
}

void dmark_note(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		uint32_t old, uint8_t otype, uint32_t new, uint8_t ntype)
{
	struct dir_cache *dc = dcache(fs);
	int fresh = new && !old && node_is_fresh(fs, new);
	int moved = new && !node_is_new(fs, new);
	int plain = !fcrypt_is_encrypted(dir);
	struct dmtab *t;
	int kept = 0;

	if (!dc)
		return;
	zlock_lock(&dc->lock);
	t = dm_tab(fs, dc);
	if (t && moved)
		dm_moved_add(t, new);
	if (t)
		kept = dm_note_locked(t, dir->nid, name, len, old, otype, new, ntype, fresh, plain);
	zlock_unlock(&dc->lock);
	/* out of memory: no record says the change, so none may say the directory is covered
	 * (a later record of the same epoch would, without it) */
	if (!kept)
		node_fsync_needs_checkpoint(fs, dir->nid);
}

void dmark_taint(struct zlfs_fs *fs, uint32_t dir)
{
	struct dir_cache *dc = dcache(fs);
	struct dmtab *t;
	struct dm_dir *d;

	if (!dc)
		return;
	zlock_lock(&dc->lock);
	t = dm_tab(fs, dc);
	d = t ? dm_dir(t, dir, 1) : NULL;
	if (d) {
		d->bad = 1;
		dm_names_free(d);
	}
	zlock_unlock(&dc->lock);
	/* out of memory: the taint is lost, so make the next fsync take a checkpoint anyway */
	if (!d)
		node_fsync_needs_checkpoint(fs, dir);
}

/* Whether the name file F was made with was, at the checkpoint, an inode's that has been given
 * another name since (renamed or linked away): recovery gives the name to F as a rename over
 * it would, taking a link from the checkpoint's inode - its last, since no mark says its new
 * name - and so would free a file that was only moved. */
static int dm_name_moved_away(struct dmtab *t, const struct dm_file *f)
{
	struct dm_dir *d = dm_dir(t, f->dir, 0);
	const struct dm_name *n = d ? dm_name(d, f->name, f->len, 0) : NULL;

	if (!n) /* the directory's records were dropped (bad): whose the name was is unknown */
		return t->nmoved || t->moved_lost;
	return n->was && (t->moved_lost || dm_moved_has(t, n->was));
}

int dmark_for_fsync(struct zlfs_fs *fs, struct node_page *np, struct node_dmark *dm, char *buf)
{
	struct dir_cache *dc = dcache(fs);
	const struct zlfs_inode *in = inode_of(np);
	struct dm_file *f;
	struct dm_dir *d;
	struct dmtab *t;
	int ok = 0;

	if (!dc || !(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_DENTRY_MARK) ||
	    !S_ISREG(le32_get(in->mode)) || le32_get(in->nlink) != 1)
		return 0;
	zlock_lock(&dc->lock);
	t = dm_tab(fs, dc);
	f = t ? dm_file(t, np->nid) : NULL;
	d = f ? dm_dir(t, f->dir, 0) : NULL;
	if (f && f->live && (!d || !d->dir_gone) && !dm_name_moved_away(t, f)) {
		dm->parent = f->dir;
		dm->len = f->len;
		dm->on_device = f->durable;
		memcpy(buf, f->name, f->len);
		ok = 1;
	}
	zlock_unlock(&dc->lock);
	/* its directory must be in the last checkpoint, with no change that needs one */
	if (!ok || node_is_fresh(fs, dm->parent))
		return 0;
	dm->name = buf;
	dm->generation = le32_get(in->generation);
	return 1;
}

void dmark_durable(struct zlfs_fs *fs, uint32_t ino)
{
	struct dir_cache *dc = dcache(fs);
	struct dm_file *f;
	struct dm_dir *d;
	struct dm_name *n;
	struct dmtab *t;

	if (!dc)
		return;
	zlock_lock(&dc->lock);
	t = dm_tab(fs, dc);
	f = t ? dm_file(t, ino) : NULL;
	if (f) {
		f->durable = 1;
		d = dm_dir(t, f->dir, 0);
		n = d ? dm_name(d, f->name, f->len, 0) : NULL;
		if (n)
			n->marked = 1;
		else if (d) /* untracked: recovery may bring back a name no record knows */
			d->bad = 1;
	}
	zlock_unlock(&dc->lock);
}

/* Every name change in directory DIR since the last checkpoint is what recovery rebuilds
 * from durable dentry marks: each name is now a file whose mark is durable, or is gone and
 * was neither there at the checkpoint nor named by a mark. */
int dmark_dir_covered(struct zlfs_fs *fs, uint32_t dir)
{
	struct dir_cache *dc = dcache(fs);
	struct dm_dir *d;
	struct dm_name *n;
	struct dmtab *t;
	int ok = 0;

	if (!dc || !(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_DENTRY_MARK) ||
	    node_is_fresh(fs, dir))
		return 0;
	zlock_lock(&dc->lock);
	t = dm_tab(fs, dc);
	d = t ? dm_dir(t, dir, 0) : NULL;
	ok = t && (!d || !d->bad);
	for (n = d ? d->names : NULL; n && ok; n = n->next) {
		struct dm_file *f = n->ino ? dm_file(t, n->ino) : NULL;

		if (n->ino)
			ok = f && f->live && f->durable && f->dir == dir;
		else
			ok = !n->was && !n->marked;
	}
	zlock_unlock(&dc->lock);
	return ok;
}
