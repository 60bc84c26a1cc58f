/*
 * test_lock.c - the lock-order checker (fs/base/lock.c): each wrong order aborts with both locks
 * named, in a child process; the orders the daemon uses pass. Built with ZLFS_LOCK_CHECK
 * whatever the build type, so it always tests the checker.
 */
#include "testutil.h"

#include "lock.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run FN in a child; its termination signal (0 when it exited normally). */
static int in_child(void (*fn)(void))
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		fn();
		_exit(0);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static struct zlock nat, seg;
static struct zrwlock cp, ino_a, ino_b;

static void setup(void)
{
	zlock_init(&nat, LR_NAT, "nat_lock");
	zlock_init(&seg, LR_SEG, "seg_lock");
	zrw_init(&cp, LR_CP, "cp_lock", 1);
	zrw_init(&ino_a, LR_ICHILD, "inode", 0);
	zrw_init(&ino_b, LR_ICHILD, "inode", 0);
}

static void good_order(void)
{
	zrw_rdlock(&cp);
	zrw_wrlock_at(&ino_a, LR_IPARENT, 5);  /* a directory as a parent */
	zrw_wrlock_at(&ino_b, LR_ICHILD, 3);   /* a child: a higher rank, any key */
	zlock_lock(&nat);
	zlock_lock(&seg);
	zlock_unlock(&seg);
	zlock_unlock(&nat);
	zrw_unlock(&ino_b);
	zrw_unlock(&ino_a);
	zrw_wrlock_at(&ino_b, LR_ICHILD, 3);   /* two of one keyed rank, keys rising */
	zrw_wrlock_at(&ino_a, LR_ICHILD, 7);
	zrw_unlock(&ino_a);
	zrw_unlock(&ino_b);
	zrw_unlock(&cp);
}

static void rank_inverted(void)
{
	zlock_lock(&seg);
	zlock_lock(&nat); /* NAT ranks below SIT */
}

static void keys_falling(void)
{
	zrw_wrlock_at(&ino_a, LR_ICHILD, 7);
	zrw_wrlock_at(&ino_b, LR_ICHILD, 3);
}

static void unkeyed_pair(void)
{
	zrw_rdlock(&ino_a);
	zrw_rdlock(&ino_b); /* same rank, no keys: never together */
}

static void read_twice(void)
{
	zrw_rdlock(&cp);
	zrw_rdlock(&cp); /* deadlocks once a checkpoint waits: refused */
}

static void cp_under_inode(void)
{
	zrw_wrlock_at(&ino_a, LR_ICHILD, 1);
	zrw_rdlock(&cp); /* a change must take the checkpoint lock first */
}

static void release_unheld(void) { lockcheck_release(&nat); }

static void try_out_of_order(void)
{
	zlock_lock(&seg);
	if (zlock_trylock(&nat)) /* cannot deadlock: allowed */
		zlock_unlock(&nat);
	zlock_unlock(&seg);
}

START_TEST(t_orders)
{
	setup();
	ck_assert_int_eq(in_child(good_order), 0);
	ck_assert_int_eq(in_child(try_out_of_order), 0);
	ck_assert_int_eq(in_child(rank_inverted), SIGABRT);
	ck_assert_int_eq(in_child(keys_falling), SIGABRT);
	ck_assert_int_eq(in_child(unkeyed_pair), SIGABRT);
	ck_assert_int_eq(in_child(read_twice), SIGABRT);
	ck_assert_int_eq(in_child(cp_under_inode), SIGABRT);
	ck_assert_int_eq(in_child(release_unheld), SIGABRT);
}
END_TEST

START_TEST(t_held)
{
	setup();
	ck_assert_int_eq(lockcheck_held(&nat), 0);
	zlock_lock(&nat);
	ck_assert_int_eq(lockcheck_held(&nat), 1);
	zlock_unlock(&nat);
	ck_assert_int_eq(lockcheck_held(&nat), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("lock");

	tcase_add_test(tc, t_orders);
	tcase_add_test(tc, t_held);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
