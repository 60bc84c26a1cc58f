/*
 * test_dir_index.c - the name index of large directories (fs/file/dir_index.c) against a plain
 * model: random inserts and removals, many names on one hash and hashes crowding one home
 * slot (the cases backward-shift deletion gets wrong), growth, and every stored location
 * found again under its hash and nowhere else.
 */
#include "testutil.h"

#include "dir_index.h"

#include <stdlib.h>

#define N 20000

struct ent {
	uint32_t hash, loc;
	int live;
};

/* How many times LOC is stored under HASH. */
static int count_of(const struct dindex *ix, uint32_t hash, uint32_t loc)
{
	uint32_t pos = 0, got;
	int n = 0;

	while (dix_next(ix, hash, &pos, &got))
		n += got == loc;
	return n;
}

static void check_model(const struct dindex *ix, const struct ent *e, int n)
{
	for (int i = 0; i < n; i++)
		ck_assert_msg(count_of(ix, e[i].hash, e[i].loc) == e[i].live,
			      "entry %d (hash %08x loc %u live %d) found %d times", i, e[i].hash,
			      e[i].loc, e[i].live, count_of(ix, e[i].hash, e[i].loc));
}

START_TEST(t_random_against_model)
{
	static struct ent e[N];
	struct dindex *ix = dix_new(16);
	unsigned seed = 12345;

	ck_assert_ptr_nonnull(ix);
	for (int i = 0; i < N; i++) {
		/* a small hash space: many names share a hash, many hashes share a home */
		e[i].hash = (uint32_t)(rand_r(&seed) % (N / 4));
		e[i].loc = dix_loc((uint32_t)i / 200, (uint32_t)i % 200);
		e[i].live = 0;
	}
	for (int round = 0; round < 4 * N; round++) {
		int i = rand_r(&seed) % N;

		if (e[i].live) {
			dix_remove(ix, e[i].hash, e[i].loc);
		} else {
			ck_assert_int_eq(dix_insert(ix, e[i].hash, e[i].loc), 0);
		}
		e[i].live = !e[i].live;
		if (round % 8000 == 0)
			check_model(ix, e, N);
	}
	check_model(ix, e, N);
	for (int i = 0; i < N; i++) /* empty it again: nothing may be left behind */
		if (e[i].live) {
			dix_remove(ix, e[i].hash, e[i].loc);
			e[i].live = 0;
		}
	check_model(ix, e, N);
	dix_free(ix);
}
END_TEST

START_TEST(t_one_hash_many_names)
{
	struct dindex *ix = dix_new(4);
	uint32_t pos = 0, loc, seen = 0;

	for (uint32_t i = 0; i < 300; i++)
		ck_assert_int_eq(dix_insert(ix, 0xdeadbeef, i), 0);
	for (uint32_t i = 0; i < 300; i += 2)
		dix_remove(ix, 0xdeadbeef, i);
	while (dix_next(ix, 0xdeadbeef, &pos, &loc)) {
		ck_assert_uint_eq(loc % 2, 1);
		seen++;
	}
	ck_assert_uint_eq(seen, 150);
	pos = 0;
	ck_assert_int_eq(dix_next(ix, 0xdeadbeee, &pos, &loc), 0); /* another hash: nothing */
	dix_free(ix);
}
END_TEST

START_TEST(t_loc_packing)
{
	uint32_t l = dix_loc(2u * ((1u << 22) - 1), 200);

	ck_assert_uint_eq(dix_loc_blk(l), 2u * ((1u << 22) - 1));
	ck_assert_uint_eq(dix_loc_slot(l), 200);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dir_index");
	TCase *tc = tcase_create("dir_index");

	tcase_add_test(tc, t_random_against_model);
	tcase_add_test(tc, t_one_hash_many_names);
	tcase_add_test(tc, t_loc_packing);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
