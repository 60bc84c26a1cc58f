/*
 * pt_nodes.c - zlfs-passthrough's inode table: the inodes the kernel knows, how many lookups
 * it holds on each, and the names it knows each by, so that a path under the source directory
 * can be made for any of them and stays true across renames, links and unlinks.
 *
 * A name is a (parent node, name) pair, not a whole path: renaming a directory then moves
 * one name and every path below it follows. A node keeps every name the kernel learned it by
 * (a lookup, a create, a link) until that name is unlinked or renamed away; paths use the
 * first. A node is freed once the kernel forgot it and no name of another node has it as
 * parent (the kernel may keep a child inode after forgetting its directory).
 *
 * Owns: the node table and its lock (taken alone, never held across a system call).
 * May call: libc.
 */
#include "pt_nodes.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 65536u

struct pname {                   /* one name of a node */
	struct pnode *parent;
	char *name;
	struct pname *next;
};

struct pnode {
	fuse_ino_t ino;          /* FUSE inode number: the source st_ino, FUSE_ROOT_ID for the root */
	uint64_t nlookup;        /* the kernel's lookups not yet forgotten */
	uint64_t children;       /* names of other nodes that have this one as parent */
	struct pname *names;     /* none for the root */
	struct pnode *next;      /* hash chain */
};

static struct {
	pthread_mutex_t lock;
	struct pnode *buckets[NBUCKETS];
	struct pnode root;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .root = {.ino = FUSE_ROOT_ID, .nlookup = 1}};

static struct pnode *find_locked(fuse_ino_t ino)
{
	struct pnode *n;

	if (ino == FUSE_ROOT_ID)
		return &T.root;
	for (n = T.buckets[ino % NBUCKETS]; n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

static void unhash_locked(struct pnode *n)
{
	struct pnode **pp;

	for (pp = &T.buckets[n->ino % NBUCKETS]; *pp; pp = &(*pp)->next)
		if (*pp == n) {
			*pp = n->next;
			return;
		}
}

/* Free N if nothing holds it any more, and with it each parent its names were holding. */
static void release_locked(struct pnode *n)
{
	while (n && n != &T.root && !n->nlookup && !n->children) {
		struct pnode *up = NULL;

		unhash_locked(n);
		while (n->names) {
			struct pname *a = n->names;

			n->names = a->next;
			if (!--a->parent->children) {
				/* one parent is released by the loop; a node with names under
				 * several parents (hard links) has its other parents released here */
				if (up)
					release_locked(a->parent);
				else
					up = a->parent;
			}
			free(a->name);
			free(a);
		}
		free(n);
		n = up;
	}
}

static struct pname **name_find_locked(struct pnode *n, struct pnode *parent, const char *name)
{
	struct pname **pp;

	for (pp = &n->names; *pp; pp = &(*pp)->next)
		if ((*pp)->parent == parent && !strcmp((*pp)->name, name))
			return pp;
	return NULL;
}

static int name_add_locked(struct pnode *n, struct pnode *parent, const char *name)
{
	struct pname *a;

	if (n == &T.root || name_find_locked(n, parent, name))
		return 0;
	if (!(a = malloc(sizeof(*a))) || !(a->name = strdup(name))) {
		free(a);
		return ENOMEM;
	}
	a->parent = parent;
	parent->children++;
	a->next = n->names;
	n->names = a;
	return 0;
}

/* Drop the name (PARENT, NAME) of N, if N has it; the caller releases PARENT. */
static void name_drop_locked(struct pnode *n, struct pnode *parent, const char *name)
{
	struct pname **pp = n ? name_find_locked(n, parent, name) : NULL, *a;

	if (!pp)
		return;
	a = *pp;
	*pp = a->next;
	parent->children--;
	free(a->name);
	free(a);
}

/* The path of N, then "/NAME" if NAME, built from the end of TMP; returns where it starts. */
static const char *path_locked(struct pnode *n, const char *name, char *tmp, int *err)
{
	size_t pos = PATH_MAX - 1;

	tmp[pos] = '\0';
	for (const char *s = name; s || n != &T.root;) {
		size_t len;

		if (!s) {
			if (!n || !n->names) {
				*err = ESTALE; /* every name unlinked: only an open file reaches it */
				return NULL;
			}
			s = n->names->name;
			n = n->names->parent;
		}
		len = strlen(s);
		if (len + 1 > pos) {
			*err = ENAMETOOLONG;
			return NULL;
		}
		if (pos != PATH_MAX - 1)
			tmp[--pos] = '/';
		pos -= len;
		memcpy(tmp + pos, s, len);
		s = NULL;
	}
	*err = 0;
	return pos == PATH_MAX - 1 ? "." : tmp + pos;
}

int pn_path(fuse_ino_t ino, const char *name, char *buf)
{
	char tmp[PATH_MAX];
	const char *p;
	int err;

	pthread_mutex_lock(&T.lock);
	p = path_locked(find_locked(ino), name, tmp, &err);
	if (p)
		memmove(buf, p, strlen(p) + 1);
	pthread_mutex_unlock(&T.lock);
	return err;
}

int pn_lookup(fuse_ino_t parent, const char *name, fuse_ino_t ino)
{
	struct pnode *p, *n;
	int err = 0;

	pthread_mutex_lock(&T.lock);
	p = find_locked(parent);
	n = find_locked(ino);
	if (!p) {
		err = ESTALE;
	} else if (!n && !(n = calloc(1, sizeof(*n)))) {
		err = ENOMEM;
	} else {
		if (!n->ino) {
			n->ino = ino;
			n->next = T.buckets[ino % NBUCKETS];
			T.buckets[ino % NBUCKETS] = n;
		}
		n->nlookup++;
		if ((err = name_add_locked(n, p, name))) {
			n->nlookup--;
			release_locked(n);
		}
	}
	pthread_mutex_unlock(&T.lock);
	return err;
}

void pn_forget(fuse_ino_t ino, uint64_t nlookup)
{
	struct pnode *n;

	if (ino == FUSE_ROOT_ID)
		return;
	pthread_mutex_lock(&T.lock);
	if ((n = find_locked(ino))) {
		n->nlookup = nlookup >= n->nlookup ? 0 : n->nlookup - nlookup;
		release_locked(n);
	}
	pthread_mutex_unlock(&T.lock);
}

void pn_unlinked(fuse_ino_t parent, const char *name, fuse_ino_t ino)
{
	struct pnode *p;

	pthread_mutex_lock(&T.lock);
	/* the node keeps its own holders (lookups, children): only the parent may go */
	if ((p = find_locked(parent))) {
		name_drop_locked(ino == FUSE_ROOT_ID ? NULL : find_locked(ino), p, name);
		release_locked(p);
	}
	pthread_mutex_unlock(&T.lock);
}

/* N's name (P, NAME) becomes (NP, NEWNAME); without memory, N only loses the old name. */
static void name_move_locked(struct pnode *n, struct pnode *p, const char *name,
			     struct pnode *np, const char *newname)
{
	if (!n || n == &T.root || !name_find_locked(n, p, name))
		return;
	name_drop_locked(n, p, name);
	name_add_locked(n, np, newname);
}

void pn_renamed(fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		fuse_ino_t ino, fuse_ino_t target, int exchange)
{
	struct pnode *p, *np, *n, *t;

	if (ino == target) /* two names of one inode: rename(2) does nothing */
		return;
	pthread_mutex_lock(&T.lock);
	p = find_locked(parent);
	np = find_locked(newparent);
	if (p && np) {
		p->children++; /* held while names move: neither may be freed half way */
		np->children++;
		n = find_locked(ino);
		t = target ? find_locked(target) : NULL;
		if (t && exchange)
			name_move_locked(t, np, newname, p, name);
		else if (t)
			name_drop_locked(t, np, newname);
		name_move_locked(n, p, name, np, newname);
		p->children--;
		np->children--;
		release_locked(p);
		release_locked(np);
	}
	pthread_mutex_unlock(&T.lock);
}
