/*
 * files.c - the file layer as a whole: mounting and unmounting it, sync and fsync, and what
 * spans its caches: the stat of an inode (with the blocks still held in memory for it) and
 * releasing everything a file owns.
 *
 * Owns: the order in which the file layer's caches reach the log (held partial blocks, then
 * directory blocks, then a checkpoint), the names of files fsync'ed after the checkpoint
 * linked (dentry marks) and the orphans freed at mount, and an inode's release
 * (held block, data tree, directory cache, xattr node, the inode itself).
 * May call: every other file of the file layer (it sits on top of them: none calls it), the
 * core (core.h), log.h.
 */
#include "files.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* On disk a time is a signed count of nanoseconds (two's complement in the le64), so times
 * before 1970 - which tar and cp -a restore - survive; tv_nsec stays in [0, 1e9). */
static void ns_to_ts(uint64_t ns, struct timespec *ts)
{
	int64_t v = (int64_t)ns, sec = v / 1000000000LL, nsec = v % 1000000000LL;

	if (nsec < 0) {
		nsec += 1000000000LL;
		sec--;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)nsec;
}

static void iattr_to_stat(uint32_t ino, const struct iattr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blksize = ZLFS_BLOCK_SIZE;
	st->st_blocks = (blkcnt_t)(a->blocks * (ZLFS_BLOCK_SIZE / 512));
	ns_to_ts(a->atime_ns, &st->st_atim);
	ns_to_ts(a->mtime_ns, &st->st_mtim);
	ns_to_ts(a->ctime_ns, &st->st_ctim);
}

void inode_fill_stat(const struct zlfs_fs *fs, struct node_page *np, struct stat *st)
{
	struct iattr a;

	iattr_of_inode(inode_of(np), &a);
	iattr_to_stat(np->nid, &a, st);
	if (S_ISDIR(a.mode))
		st->st_blocks += (blkcnt_t)dir_pending_blocks((struct zlfs_fs *)fs, np->nid) *
				 (ZLFS_BLOCK_SIZE / 512);
	else /* a partial block held in memory counts as it will once written */
		st->st_blocks += (blkcnt_t)tail_pending_blocks((struct zlfs_fs *)fs, np->nid) *
				 (ZLFS_BLOCK_SIZE / 512);
}

int inode_stat(struct zlfs_fs *fs, uint32_t ino, struct stat *st, uint32_t *generation)
{
	struct node_page *np;
	struct ilock *il;
	struct iattr a;
	int ret;

	/* The common case for stat of many files: no node read. A directory's count includes
	 * blocks its flush may be writing, so it is read under the directory's lock, and a
	 * file's its held partial block (tailbuf.c), under the file's. */
	if (!iattr_get(fs, ino, &a) && !S_ISDIR(a.mode) && !tail_pending_blocks(fs, ino)) {
		iattr_to_stat(ino, &a, st);
		*generation = a.generation;
		return 0;
	}
	il = ilock_take(fs, ino, 0, LR_ICHILD, ino); /* a miss reads the page: it must hold still */
	if (!il)
		return -ENOMEM;
	ret = inode_get(fs, ino, &np);
	if (!ret) {
		inode_fill_stat(fs, np, st);
		*generation = le32_get(inode_of(np)->generation);
		node_put(fs, np);
	}
	ilock_drop(fs, il);
	return ret;
}

int inode_free(struct zlfs_fs *fs, uint32_t ino)
{
	struct node_page *np;
	int isdir, ret = inode_get(fs, ino, &np);

	if (ret)
		return ret;
	tail_drop(fs, ino);
	if (!zlfs_iflags_area_inline(le32_get(inode_of(np)->flags)))
		ret = data_truncate_blocks(fs, np, 0);
	if (!ret)
		xattr_free_all(fs, np);
	isdir = S_ISDIR(le32_get(inode_of(np)->mode));
	node_put(fs, np);
	if (ret)
		return ret;
	if (isdir)
		dir_cache_drop(fs, ino);
	node_free(fs, ino);
	return 0;
}

/* Free INO when it has no link left; with DROP after taking one away (its name given to a
 * file fsync'ed after the checkpoint, as a rename over it). Neither the orphan list nor a mark
 * is trusted blindly: an inode that still has links is kept. */
static int inode_free_unlinked(struct zlfs_fs *fs, uint32_t ino, int drop)
{
	struct node_page *np;
	uint32_t nlink;
	int ret = inode_get(fs, ino, &np);

	if (ret)
		return ret;
	nlink = le32_get(inode_of(np)->nlink);
	if (drop && nlink) {
		inode_of(np)->nlink = le32_put(--nlink);
		inode_touch(fs, np, INODE_CTIME);
	}
	node_put(fs, np);
	if (nlink) {
		if (!drop)
			zlog_warn("orphan list names inode %u, which still has %u links: kept", ino,
				  nlink);
		return 0;
	}
	if (orphan_is(fs, ino)) /* freed here, not again from the list */
		orphan_del(fs, ino);
	return inode_free(fs, ino);
}

/* ---- after a crash: the names recovery found (dentry marks) ------------------------------ */

/* An inode a mark needs is free or damaged: the mark is refused (-EUCLEAN). Any other error
 * is the device's or memory's, not the mark's: carried up, so that no mount goes on without
 * the name. */
static int dm_missing(int ret)
{
	return ret == -ESTALE || ret == -EUCLEAN ? -EUCLEAN : ret;
}

static int dm_names_it(const struct zlfs_inode *in, const struct rec_dmark *m)
{
	return S_ISREG(le32_get(in->mode)) && le32_get(in->nlink) == 1 &&
	       le32_get(in->generation) == m->generation;
}

/* -EUCLEAN, with *WHY, when mark M cannot be linked: its inode must be the regular file of
 * one link it names, its directory a directory without a key. */
static int dm_refused(struct zlfs_fs *fs, const struct rec_dmark *m, struct node_page **dir,
		      const char **why)
{
	struct node_page *np;
	int ret = inode_get(fs, m->ino, &np);

	*why = "its inode is not there";
	if (ret)
		return dm_missing(ret);
	*why = "its inode is not the regular file of one link it names";
	ret = dm_names_it(inode_of(np), m) ? 0 : -EUCLEAN;
	node_put(fs, np);
	if (ret)
		return ret;
	*why = "its directory is not there";
	ret = inode_get(fs, m->parent, dir);
	if (ret)
		return dm_missing(ret);
	*why = "its directory is no plain directory";
	if (!S_ISDIR(le32_get(inode_of(*dir)->mode)) || fcrypt_is_encrypted(*dir)) {
		node_put(fs, *dir);
		return -EUCLEAN;
	}
	return 0;
}

/* Link the name of mark M, as a rename of the file over the name would. */
static int dm_link(struct zlfs_fs *fs, const struct rec_dmark *m)
{
	struct node_page *dir;
	const char *why;
	uint32_t x;
	uint8_t type;
	int ret = dm_refused(fs, m, &dir, &why);

	if (ret == -EUCLEAN)
		zlog_warn("recovery: the name of inode %u, fsync'ed after the checkpoint, cannot be "
			  "linked into directory %u (%s)", m->ino, m->parent, why);
	if (ret)
		return ret;
	ret = dir_lookup(fs, dir, m->name, m->len, &x, &type);
	if (ret == -ENOENT) {
		x = 0;
		ret = dir_add(fs, dir, m->name, m->len, m->ino, DT_REG);
	} else if (!ret && x == m->ino) {
		node_put(fs, dir); /* linked by an earlier mark of the same file */
		return 0;
	} else if (!ret && type == DT_DIR) {
		ret = -EISDIR;
	} else if (!ret) {
		ret = dir_retarget(fs, dir, m->name, m->len, m->ino, DT_REG);
	}
	if (!ret)
		inode_touch(fs, dir, INODE_MTIME | INODE_CTIME);
	node_put(fs, dir);
	return !ret && x ? inode_free_unlinked(fs, x, 1) : ret;
}

static int dm_later_mark(const struct zlfs_fs *fs, uint32_t i)
{
	for (uint32_t j = i + 1; j < fs->nr_rec_dmarks; j++)
		if (fs->rec_dmarks[j].ino == fs->rec_dmarks[i].ino)
			return 1;
	return 0;
}

static int link_recovered(struct zlfs_fs *fs)
{
	uint32_t i, linked = 0;
	int ret = 0;

	/* Read-only too (fsck -n): in memory, as the roll-forward itself, so that the tree seen
	 * is the one the next read-write mount makes. */
	for (i = 0; i < fs->nr_rec_dmarks && !ret; i++) {
		const struct rec_dmark *m = &fs->rec_dmarks[i];

		ret = dm_link(fs, m);
		if (ret == -EISDIR && !dm_later_mark(fs, i)) {
			zlog_warn("recovery: directory %u names a directory where inode %u, "
				  "fsync'ed after the checkpoint, was made: that file is freed",
				  m->parent, m->ino);
			ret = inode_free(fs, m->ino);
		} else if (ret == -EUCLEAN || ret == -EISDIR) {
			ret = 0; /* said; fsck.zlfs tells the rest */
		} else if (!ret) {
			linked++;
		}
		seg_mark(fs, m->addr, 0); /* the name is in its directory's blocks now */
	}
	if (linked)
		zlog_info("linked %u names made durable by fsync after checkpoint %llu", linked,
			  (unsigned long long)fs->cp.version);
	free(fs->rec_dmarks);
	fs->rec_dmarks = NULL;
	fs->nr_rec_dmarks = 0;
	return ret;
}

int files_mount(const char *path, const struct zlfs_mount_opts *o, struct zlfs_fs **out)
{
	struct zlfs_fs *fs;
	uint32_t freed = 0;
	int ret = zlfs_mount(path, o, &fs);

	if (ret)
		return ret;
	ret = dir_cache_init(fs);
	if (!ret)
		ret = ra_init(fs);
	if (ret) {
		ra_destroy(fs);
		zlfs_unmount(fs);
		return ret;
	}
	fcrypt_mount_notice(fs, path);
	/* before the orphans: a name given to a fsync'ed file may take a file's last link */
	ret = link_recovered(fs);
	if (ret) {
		/* nothing written: a checkpoint now would forget the marks not linked yet, which
		 * the next mount finds again */
		zlog_err("the names fsync'ed after checkpoint %llu cannot be linked (%s): mount "
			 "refused, nothing written", (unsigned long long)fs->cp.version,
			 strerror(-ret));
		ATOMIC_SET(&fs->readonly, 1);
		files_unmount(fs);
		return ret;
	}
	for (uint32_t ino = orphan_next(fs, 0); ino && !fs->readonly; ino = orphan_next(fs, ino)) {
		orphan_del(fs, ino);
		ret = inode_free_unlinked(fs, ino, 0);
		if (ret && ret != -ESTALE)
			zlog_warn("cannot free orphan inode %u: %s", ino, strerror(-ret));
		freed++;
	}
	/* After a crash the device holds blocks past the checkpoint: a new checkpoint moves the
	 * version on, so those blocks can never be mistaken for this session's. */
	if ((freed || fs->dirty) && !fs->readonly) {
		if (freed)
			zlog_info("freed %u inodes unlinked while open before the last unmount", freed);
		ret = files_sync(fs);
		if (ret) {
			files_unmount(fs);
			return ret;
		}
	}
	*out = fs;
	return 0;
}

/* The fsync that needs no checkpoint: -EAGAIN when only a checkpoint will do. */
static int files_fsync_fast(struct zlfs_fs *fs, uint32_t ino)
{
	char name[ZLFS_NAME_MAX + 1];
	struct node_dmark dm;
	struct node_page *np;
	struct ilock *il;
	int isdir, mark = 0, ret;

	zrw_rdlock(&fs->cp_lock);
	il = ilock_take(fs, ino, 1, LR_ICHILD, ino);
	ret = il ? inode_get(fs, ino, &np) : -ENOMEM;
	if (!ret) {
		isdir = S_ISDIR(le32_get(inode_of(np)->mode));
		/* The held partial block joins the data the fsync's one flush makes durable,
		 * and stays as a clean copy for the next write into it. */
		ret = isdir ? 0 : tail_sync(fs, np);
		if (!ret && !isdir) /* a file made since the checkpoint: its name in a mark */
			mark = dmark_for_fsync(fs, np, &dm, name);
		node_put(fs, np);
		/* Files whose node set changed, or whose name no mark can say, and directories
		 * with a change no durable mark covers need a checkpoint; everything else is
		 * rolled forward from its fsync'ed nodes (and marks) after a crash. */
		if (!ret && isdir)
			ret = dmark_dir_covered(fs, ino) ? 0 : -EAGAIN;
		else if (!ret)
			ret = node_fsync(fs, ino, mark ? &dm : NULL);
		if (!ret && mark)
			dmark_durable(fs, ino);
	}
	ilock_drop(fs, il);
	zrw_unlock(&fs->cp_lock);
	return ret;
}

int files_fsync(struct zlfs_fs *fs, uint32_t ino)
{
	int ret = files_fsync_fast(fs, ino);

	return ret == -EAGAIN ? files_sync(fs) : ret;
}

/* Under cp_lock exclusive: everything changed so far made durable. */
static int sync_locked(struct zlfs_fs *fs)
{
	int ret = tail_flush_all(fs); /* data first: it dirties the nodes that point to it */

	if (!ret)
		ret = dir_flush(fs);
	/* Nothing changed since the last checkpoint (every change marks the filesystem dirty,
	 * and that checkpoint drained the write buffer): it already says all a new one would,
	 * and a second costs two device flushes for nothing. SQLite's rollback journal asks for
	 * one right after the journal's own fsync took one (its directory's fsync). */
	if (!ret && ATOMIC_GET(&fs->dirty))
		ret = ckpt_write(fs, 0);
	return ret;
}

int files_sync(struct zlfs_fs *fs)
{
	int ret;

	zrw_wrlock(&fs->cp_lock);
	ret = sync_locked(fs);
	zrw_unlock(&fs->cp_lock);
	return ret;
}

int files_set_readonly(struct zlfs_fs *fs)
{
	int ret;

	zrw_wrlock(&fs->cp_lock); /* no change is under way: each holds cp_lock shared */
	ret = ATOMIC_GET(&fs->readonly) ? -EROFS : sync_locked(fs);
	if (!ret)
		ATOMIC_SET(&fs->readonly, 1);
	zrw_unlock(&fs->cp_lock);
	return ret;
}

int files_unmount(struct zlfs_fs *fs)
{
	int ret = 0;

	zrw_wrlock(&fs->cp_lock);
	if (!ATOMIC_GET(&fs->readonly))
		ret = tail_flush_all(fs);
	if (!ATOMIC_GET(&fs->readonly)) { /* directory blocks go even if a data block did not */
		int r = dir_flush(fs);

		ret = ret ? ret : r;
	}
	tail_destroy(fs);
	dmark_destroy(fs);
	dir_cache_destroy(fs);
	ra_destroy(fs);
	if (ret)
		ATOMIC_SET(&fs->readonly, 1);
	zrw_unlock(&fs->cp_lock);
	return zlfs_unmount(fs) ?: ret;
}
