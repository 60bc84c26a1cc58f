/*
 * fuse_ops.c - the FUSE session: the top layer of the daemon.
 *
 * Owns: the operations table and the connection's settings, the per-mount state (struct
 * zfuse), zlfs-ctl's ioctls, the periodic checkpoint, and the clean unmount. The requests
 * themselves are in fuse_names.c, fuse_files.c and remount.c; what they all share (entering
 * and leaving the filesystem, lookup counts, replies) in request.c.
 * May call: fuse_int.h, background.h, files.h, core.h (checkpoints, free space), log.h.
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "files.h"
#include "log.h"
#include "background.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <linux/fs.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- session ------------------------------------------------------------------------------- */

static int encrypt_policy_set(struct zfuse *z, fuse_req_t req, struct node_page *np)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	int ret = writable(z), was;

	if (!ret && uid && uid != le32_get(inode_of(np)->uid))
		ret = -EACCES; /* only the owner (or root) chooses a directory's policy */
	if (ret)
		return ret;
	was = fcrypt_is_encrypted(np);
	ret = fcrypt_set_policy(z->fs, np);
	return ret ? ret : !was; /* 1: newly encrypted, to be made durable */
}

static void ioctl_encrypt(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, size_t out_size)
{
	struct zfuse *z = zf(req);
	struct zlfs_ioc_encrypt e = {0};
	struct node_page *np;
	struct ilock *il;
	int ret, set;

	if (cmd == ZLFS_IOC_GET_ENCRYPT && out_size < sizeof(e)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	set = cmd == ZLFS_IOC_SET_ENCRYPT;
	op_enter(z, set);
	il = ilock_take(z->fs, fino(ino), set, LR_ICHILD, fino(ino));
	ret = il ? inode_get(z->fs, fino(ino), &np) : -ENOMEM;
	if (!ret) {
		if (set)
			ret = encrypt_policy_set(z, req, np);
		e.flags = (fcrypt_is_encrypted(np) ? ZLFS_ENC_ENCRYPTED : 0) |
			  (z->fs->master ? ZLFS_ENC_KEY : 0);
		node_put(z->fs, np);
	}
	ilock_drop(z->fs, il);
	op_leave(z, set);
	/* durable before the call returns: names added later are read as ciphertext only if
	 * the flag and nonce they were made under survive a crash */
	if (ret == 1)
		ret = files_sync(z->fs);
	if (ret)
		reply_err(req, ret);
	else if (cmd == ZLFS_IOC_GET_ENCRYPT)
		fuse_reply_ioctl(req, 0, &e, sizeof(e));
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

/* zlfs-ctl gc: a collection now, greedy, up to the zones asked for, checkpointed so the
 * emptied zones are free when it returns. It writes a lot, so only root and the user the
 * daemon runs as may ask. */
static void ioctl_gc(fuse_req_t req, const void *in_buf, size_t in_size, size_t out_size)
{
	struct zfuse *z = zf(req);
	struct zlfs_fs *fs = z->fs;
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct zlfs_ioc_gc g = {0};
	int ret = in_size < sizeof(g) || out_size < sizeof(g) ? -EINVAL : 0;

	if (!ret && c->uid && c->uid != getuid())
		ret = -EPERM;
	if (!ret)
		ret = writable(z);
	if (ret) {
		reply_err(req, ret);
		return;
	}
	memcpy(&g, in_buf, sizeof(g));
	op_enter(z, 0);
	zlock_lock(&fs->gc_lock);
	ret = gc_reclaim(fs, UINT32_MAX, GC_PICK_EMERGENCY, g.zones);
	if (ret == -ENOENT) /* nothing worth collecting is no error */
		ret = 0;
	if (ret > 0 || (!ret && seg_prefree_zones(fs))) {
		int done = ret, s = files_sync(fs);

		ret = s ? s : done;
	}
	zlock_unlock(&fs->gc_lock);
	op_leave(z, 0);
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	g.zones = (unsigned)ret;
	fuse_reply_ioctl(req, 0, &g, sizeof(g));
}

/* zlfs-ctl talks to the daemon through ioctls on the mount's root (zlfs_ioctl.h), and on a
 * directory for its encryption policy. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_size,
		     size_t out_size)
{
	struct zfuse *z = zf(req);
	struct zlfs_ioc_stats *st;
	int ret;

	(void)arg;
	(void)fi;
	if (!(flags & FUSE_IOCTL_COMPAT) &&
	    (cmd == ZLFS_IOC_SET_ENCRYPT || cmd == ZLFS_IOC_GET_ENCRYPT)) {
		ioctl_encrypt(req, ino, cmd, out_size);
		return;
	}
	if (!(flags & FUSE_IOCTL_COMPAT) && cmd == ZLFS_IOC_COMPRESS_INFO) {
		ioctl_compress_info(req, ino, out_size); /* fuse_files.c */
		return;
	}
	if (cmd == FS_IOC_GETFLAGS || cmd == FS_IOC_SETFLAGS || cmd == FS_IOC_FSGETXATTR) {
		ioctl_flags(req, ino, cmd, in_buf, in_size, out_size); /* fuse_files.c */
		return;
	}
	if (!(flags & FUSE_IOCTL_COMPAT) &&
	    (cmd == ZLFS_IOC_COLLAPSE_RANGE || cmd == ZLFS_IOC_INSERT_RANGE)) {
		ioctl_shift(req, ino, cmd, in_buf, in_size); /* fuse_files.c */
		return;
	}
	if (ino != FUSE_ROOT_ID || (flags & FUSE_IOCTL_COMPAT)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (cmd == ZLFS_IOC_GC) {
		ioctl_gc(req, in_buf, in_size, out_size);
		return;
	}
	if (cmd == ZLFS_IOC_REMOUNT_READONLY || cmd == ZLFS_IOC_REMOUNT_READWRITE) {
		ioctl_remount(req, cmd); /* remount.c */
		return;
	}
	if (cmd == ZLFS_IOC_SYNC) {
		op_enter(z, 0);
		ret = ATOMIC_GET(&z->fs->readonly) ? 0 : files_sync(z->fs);
		op_leave(z, 0);
		if (ret)
			reply_err(req, ret);
		else
			fuse_reply_ioctl(req, 0, NULL, 0);
		return;
	}
	if (cmd != ZLFS_IOC_STATS || out_size < sizeof(*st)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	op_enter(z, 0);
	ret = zlfs_stats_json(z->fs, st->json, sizeof(st->json));
	op_leave(z, 0);
	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_ioctl(req, 0, st, sizeof(*st));
	free(st);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct zfuse *z = userdata;

	conn->max_write = 1024 * 1024;
	/* Requests the kernel may have outstanding without waiting: read-ahead and async direct
	 * I/O keep several in flight (the kernel's default is 12). */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	/* IOCTL_DIR: zlfs-ctl on the root; PARALLEL_DIROPS: lookups and readdir of one directory
	 * need not wait for each other in the kernel; CACHE_SYMLINKS: readlink is answered from
	 * the page cache. Not NO_OPENDIR_SUPPORT (see op_opendir). Not SPLICE_READ: requests
	 * arrive in memory anyway, and splicing small ones costs a second system call each. */
	conn->want |= conn->capable & (FUSE_CAP_IOCTL_DIR | FUSE_CAP_PARALLEL_DIROPS |
				       FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_EXPORT_SUPPORT);
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_NO_OPENDIR_SUPPORT);
	/* POSIX ACLs: the kernel enforces them, zlfs keeps the mode in step and gives new
	 * inodes their directory's default ACL; so it also applies the umask (DONT_MASK), which
	 * a default ACL replaces. Both or neither. */
	if ((conn->capable & (FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)) ==
	    (FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		z->posix_acl = 1;
	}
	if (z->opts.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

/* A directory needs no open state (readdir offsets are positions in its blocks), but opendir
 * is answered rather than refused with ENOSYS (NO_OPENDIR_SUPPORT): without an answer the
 * kernel caches every listing (FOPEN_CACHE_DIR), and a listing read while another thread
 * renamed out of the directory stayed in that cache after the rename (test_stress saw
 * renamed names still listed). The reply asks for no cache. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fi->cache_readdir = 0;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

#define NS_PER_S 1000000000ull

/* Wait on the thread's condition until mono_ns() reaches WAKE (UINT64_MAX: a signal). */
static void cp_sleep(struct zfuse *z, uint64_t wake)
{
	uint64_t now = mono_ns(), d;
	struct timespec ts;

	if (wake == UINT64_MAX) {
		zlock_wait(&z->cp_cond, &z->cp_lock);
		return;
	}
	if (wake <= now)
		return;
	d = wake - now;
	clock_gettime(CLOCK_REALTIME, &ts); /* the condition's clock */
	ts.tv_sec += (time_t)(d / NS_PER_S);
	ts.tv_nsec += (long)(d % NS_PER_S);
	if (ts.tv_nsec >= (long)NS_PER_S) {
		ts.tv_sec++;
		ts.tv_nsec -= (long)NS_PER_S;
	}
	zlock_timedwait(&z->cp_cond, &z->cp_lock, &ts);
}

/* Checkpoints every cp_interval seconds while anything changed, and when a request finds
 * one due (ckpt_request): the request goes on, the checkpoint is written here. In between,
 * every half of tail_secs, it writes the partial blocks held for tail_secs or longer
 * (tailbuf.c), so a block waits at most about one and a half times that. */
static void *cp_thread(void *arg)
{
	struct zfuse *z = arg;
	uint64_t cp_ns = (uint64_t)z->opts.cp_interval * NS_PER_S, next_cp = mono_ns() + cp_ns;
	uint64_t tail_ns = z->fs->tails ? (uint64_t)z->opts.tail_secs * NS_PER_S : 0, now, wake;
	int due;

	zlock_lock(&z->cp_lock);
	while (!z->cp_stop) {
		wake = cp_ns ? next_cp : UINT64_MAX;
		if (tail_ns && mono_ns() + tail_ns / 2 < wake)
			wake = mono_ns() + tail_ns / 2;
		if (!z->cp_wanted)
			cp_sleep(z, wake);
		if (z->cp_stop)
			break;
		now = mono_ns();
		due = z->cp_wanted || (cp_ns && now >= next_cp);
		z->cp_wanted = 0;
		zlock_unlock(&z->cp_lock);
		if (due) {
			if (ATOMIC_GET(&z->fs->dirty) && !ATOMIC_GET(&z->fs->readonly))
				files_sync(z->fs);
			next_cp = now + cp_ns;
		} else if (tail_ns) {
			tail_flush_aged(z->fs, tail_ns);
		}
		zlock_lock(&z->cp_lock);
	}
	zlock_unlock(&z->cp_lock);
	return NULL;
}

static const struct fuse_lowlevel_ops zlfs_ll_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
	.ioctl = op_ioctl,
};

const struct fuse_lowlevel_ops *zlfs_fuse_ops(void) { return &zlfs_ll_ops; }

struct zfuse *zfuse_new(struct zlfs_fs *fs, const struct zlfs_ops_opts *o)
{
	struct zfuse *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->fs = fs;
	z->opts = *o;
	if (!fs->readonly && tail_init(fs, o->tail_blocks))
		zlog_warn("no memory for partial blocks: every write goes to the device at once");
	if (rcache_init(fs, o->read_cache_blocks))
		zlog_warn("no memory for the read cache: every read goes to the device");
	z->nbuckets = 65536;
	z->irefs = calloc(z->nbuckets, sizeof(*z->irefs));
	zlock_init(&z->iref_lock, LR_IREF, "iref_lock");
	zlock_init(&z->cp_lock, LR_CKREQ, "ckpt_request_lock");
	pthread_cond_init(&z->cp_cond, NULL);
	if (!z->irefs) {
		free(z);
		return NULL;
	}
	return z;
}

int zfuse_start(struct zfuse *z, struct fuse_session *se)
{
	z->se = se;
	if (!z->fs->readonly && z->opts.background_gc && bg_start(z->fs, &z->bg))
		zlog_warn("background GC could not start: collection runs in the foreground only");
	if (z->fs->readonly)
		return 0;
	if (pthread_create(&z->cp_thread, NULL, cp_thread, z))
		return -EAGAIN; /* requests then write the checkpoints they find due */
	z->cp_running = 1;
	return 0;
}

/* Stop the timer, free what only the kernel still held, and unmount cleanly. */
int zfuse_destroy(struct zfuse *z)
{
	uint32_t b;
	int ret;

	bg_stop(z->bg);
	if (z->opts.verbose) {
		char *json = malloc(ZLFS_STATS_MAX);

		if (json && zlfs_stats_json(z->fs, json, ZLFS_STATS_MAX) > 0)
			zlog(ZLOG_ERR, "statistics at unmount:\n%s", json); /* shown at any level */
		free(json);
	}
	if (z->cp_running) {
		zlock_lock(&z->cp_lock);
		z->cp_stop = 1;
		pthread_cond_signal(&z->cp_cond);
		zlock_unlock(&z->cp_lock);
		pthread_join(z->cp_thread, NULL);
		z->cp_running = 0;
	}
	for (uint32_t ino = orphan_next(z->fs, 0); ino && !z->fs->readonly;
	     ino = orphan_next(z->fs, ino)) {
		orphan_del(z->fs, ino);
		inode_free(z->fs, ino);
	}
	ret = files_unmount(z->fs);
	for (b = 0; b < z->nbuckets; b++)
		while (z->irefs[b]) {
			struct iref *r = z->irefs[b];

			z->irefs[b] = r->next;
			free(r);
		}
	free(z->irefs);
	pthread_cond_destroy(&z->cp_cond);
	zlock_destroy(&z->cp_lock);
	zlock_destroy(&z->iref_lock);
	free(z);
	return ret;
}
