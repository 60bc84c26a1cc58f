/*
 * stress.h - what the two files of test_stress share: the clients' model of their files and
 * directories and their operations (stress_clients.c), for the harness that starts them,
 * watches them and checks what they left (test_stress.c).
 */
#ifndef ZLFS_STRESS_H
#define ZLFS_STRESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Paths are the scratch directory plus short names; truncation cannot happen. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NTHREADS 8
#define NSHARED 4        /* shared directories s0..s3 */
#define NFILES 12        /* file slots per thread */
#define NDIRS 3          /* small-directory slots per thread */
#define FILE_MAX (128 << 10)
#define WRITE_MAX (16 << 10)
#define HISTORY 24       /* operations kept per thread for a failure report */

enum op {
	OP_CREATE, OP_APPEND, OP_OVERWRITE, OP_TRUNCATE, OP_FSYNC, OP_VERIFY, OP_STAT, OP_READDIR,
	OP_UNLINK, OP_RENAME, OP_MKDIR, OP_RENAME_DIR, OP_RMDIR, OP_FSYNC_DIR, OP_NR
};

struct sfile {
	int live;
	int parent; /* < NSHARED: shared directory; else NSHARED + own directory slot */
	char name[24];
	size_t size;
	uint8_t *data;
};

struct sdir {
	int live;
	int parent; /* shared directory */
	char name[24];
};

/* What a thread is doing now, for the watchdog. */
struct activity {
	pthread_mutex_t lock;
	char what[160]; /* empty between operations */
	double since;
};

struct worker {
	int id;
	uint64_t rng;
	long seq;         /* names are never reused */
	struct sfile f[NFILES];
	struct sdir d[NDIRS];
	uint8_t *buf;
	long count[OP_NR];
	long opno;
	char hist[HISTORY][160];
	char err[768];
	struct activity act;
};


extern const char *const op_names[OP_NR];
extern struct worker g_w[NTHREADS];
extern char g_mnt[512];
extern int g_stop;     /* atomic: a thread failed, all stop */
extern double g_until; /* when the clients stop */

double now_s(void);
const char *ename(int e);
uint64_t rnd(uint64_t *s);
/* Bytes that depend on SEED and the offset in BUF. */
void fill(uint8_t *buf, size_t len, uint64_t seed);
void act_set(struct activity *a, const char *what);
/* Seconds A has been at its current operation (0 between operations), and what it is. */
double act_age(struct activity *a, char *what, size_t len);

/* A client thread: random operations until g_until or g_stop; its error in w->err. */
void *worker_main(void *arg);
/* The file holds exactly the model's bytes; our entries in PARENT (a shared directory, or
 * NSHARED + one of our directory slots) are exactly the model's. 0, or -1 with w->err set. */
int check_file(struct worker *w, const struct sfile *f, uint8_t *buf, const char *when);
int check_listing(struct worker *w, int parent, const char *when);

#endif
