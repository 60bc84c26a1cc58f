/*
 * fuse_int.h - what the files of the FUSE layer share: the per-mount state and the helpers
 * every request uses (fuse_ops.c), and the operations each file implements for the table in
 * fuse_ops.c. Nothing below the FUSE layer includes it.
 */
#ifndef ZLFS_FUSE_INT_H
#define ZLFS_FUSE_INT_H

#include "fuse_ops.h"

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#define LINK_MAX_ZLFS 65000

struct bg;
struct node_page;

struct zfuse {
	struct zlfs_fs *fs;
	struct zlfs_ops_opts opts;
	struct fuse_session *se;    /* for notifications to the kernel (zfuse_start) */
	/* lookup counts the kernel holds, per inode */
	struct iref {
		struct iref *next;
		uint32_t ino;
		uint64_t nlookup;
		int direct_written; /* an O_DIRECT write since the lookup (iref_direct_*) */
	} **irefs;
	uint32_t nbuckets;
	struct zlock iref_lock;     /* the lookup counts (a leaf) */
	struct bg *bg;
	/* the checkpoint thread: woken by the timer and by requests that find one due */
	pthread_t cp_thread;
	struct zlock cp_lock;       /* the fields below */
	pthread_cond_t cp_cond;
	int cp_stop, cp_wanted, cp_running;
	int forgets_running;        /* iref_forget calls under way (atomic): frees to wait for */
	int remounted_ro;           /* atomic: read-only by a remount, which may undo it */
	int posix_acl;              /* the kernel enforces POSIX ACLs and leaves the umask to
				     * us (FUSE_CAP_POSIX_ACL, FUSE_CAP_DONT_MASK; set at init) */
};

static inline struct zfuse *zf(fuse_req_t req) { return fuse_req_userdata(req); }
static inline uint32_t fino(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? ZLFS_ROOT_INO : (uint32_t)ino;
}
static inline fuse_ino_t kino(uint32_t ino) { return ino == ZLFS_ROOT_INO ? FUSE_ROOT_ID : ino; }

/* ---- fuse_ops.c: lookup counts, entering and leaving the filesystem ---------------------- */
/* One more lookup of INO held by the kernel (a leaf lock: callable under any other). */
void iref_get(struct zfuse *z, uint32_t ino);
/* An O_DIRECT write of INO is done: the kernel's cached pages of it may be stale. */
void iref_direct_written(struct zfuse *z, uint32_t ino);
/* 1 when INO has had an O_DIRECT write since the kernel looked it up: an open of it drops
 * the kernel's cache instead of keeping it. */
int iref_direct_seen(struct zfuse *z, uint32_t ino);
/* Give back a lookup just taken that never reached the kernel (readdirplus). */
void iref_undo(struct zfuse *z, uint32_t ino);
/* The kernel forgot N lookups of INO: an orphan whose count reaches 0 is freed. Called with
 * no lock held. */
void iref_forget(struct zfuse *z, uint32_t ino, uint64_t n);
/* The last name of INO is gone (INO locked exclusively, cp_lock shared): free it now, or
 * when the kernel forgets it. */
int inode_unlinked(struct zfuse *z, uint32_t ino);
/* A request enters the filesystem; CHANGE: it will change something (takes cp_lock shared). */
void op_enter(struct zfuse *z, int change);
/* It leaves (all its inode locks dropped): the foreground GC and the checkpoint that are due
 * run from here, with no lock held. */
void op_leave(struct zfuse *z, int change);
/* After a change failed (and left): 1 when it is worth one more try, after collecting
 * (-ENOSPC) or a checkpoint (-EAGAIN: only freshly freed nids were left). */
int op_retry(struct zfuse *z, int ret);
/* Free zones down to what the logs need: collect now, then checkpoint. */
int gc_foreground(struct zlfs_fs *fs);
int reply_err(fuse_req_t req, int err);
/* ---- remount.c: ZLFS_IOC_REMOUNT_READONLY and _READWRITE on the root ---------------------- */
void ioctl_remount(fuse_req_t req, unsigned int cmd);
int check_name(const char *name);
int writable(struct zfuse *z);
void fill_entry(struct zfuse *z, struct node_page *np, struct fuse_entry_param *e);
int fill_entry_ino(struct zfuse *z, uint32_t ino, struct fuse_entry_param *e);
int get_dir(struct zfuse *z, fuse_ino_t ino, struct node_page **np);

/* ---- fuse_names.c ------------------------------------------------------------------------ */
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_readlink(fuse_req_t req, fuse_ino_t ino);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	       const char *newname, unsigned int flags);

/* ---- fuse_files.c ------------------------------------------------------------------------ */
/* What a request does to one inode, with the inode locked. */
typedef int (*inode_fn)(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg);
/* FN on INO: reading under its lock shared, or (CHANGE) changing under it exclusive, tried
 * again after a foreground GC or a checkpoint when it ran out of room or fresh nids. */
int with_inode(struct zfuse *z, fuse_req_t req, fuse_ino_t ino, int change, inode_fn fn,
	       void *arg);
/* fallocate's MODE on INO (the FALLOC_FL_* flags), from a request or an ioctl. */
int fallocate_any(struct zfuse *z, fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi);
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	      struct fuse_file_info *fi);
void op_sync(fuse_req_t req);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		  struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_statfs(fuse_req_t req, fuse_ino_t ino);
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		 size_t size, int flags);
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ---- fuse_ioctl.c ------------------------------------------------------------------------ */
/* COLLAPSE_RANGE and INSERT_RANGE, which the kernel's FUSE module does not pass on: ioctls
 * on the file (zlfs_ioctl.h). */
void ioctl_shift(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, const void *in_buf,
		 size_t in_size);
/* lsattr, chattr: FS_IOC_GETFLAGS and SETFLAGS, FS_IOC_FSGETXATTR. */
void ioctl_flags(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, const void *in_buf,
		 size_t in_size, size_t out_size);
void ioctl_compress_info(fuse_req_t req, fuse_ino_t ino, size_t out_size);

#endif
