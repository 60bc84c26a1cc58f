/*
 * test_crash_names.c - the workload test_crash cuts power in for names an fsync makes durable
 * without a checkpoint (the DENTRY_MARK feature): files made since the last checkpoint and
 * fsync'ed, beside files made and never fsync'ed; SQLite's rollback journal made, fsync'ed,
 * its directory fsync'ed, the database fsync'ed and the journal unlinked, over and over, under
 * a name the checkpoint knows for another inode; a name a directory had at the checkpoint,
 * taken by a new file in a subdirectory; and the cases a mark cannot say, which take a
 * checkpoint: a file renamed after it was made, a file in a new directory, a name a removed
 * directory had. Part of test_crash (test_crash.c).
 */
#include "crash_testutil.h"

#include <stdio.h>

/* One transaction of SQLite in rollback mode (synchronous=FULL): the journal made and written,
 * fsync'ed, its header rewritten and fsync'ed again with its directory (the first fsync of a
 * journal opened with DIRSYNC), the database written and fsync'ed, the journal unlinked (the
 * commit). EXTRA: the directory fsync'ed after the unlink. */
static void sqlite_commit(int i, int extra)
{
	struct stage *s;

	write_file("db-journal", 130 + (uint32_t)i, 4096 + (size_t)i * 1000, 0, 1);
	s = stage_next();
	stage_take(s, "db-journal");
	stage_seal(s);
	write_file("db-journal", 140 + (uint32_t)i, 512, 0, 0);
	fsync_path("db-journal");
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, ".");
	stage_seal(s);
	write_file("db", 150 + (uint32_t)i, 4096, (size_t)i * 4096, 1);
	s = stage_next();
	stage_take(s, "db");
	stage_seal(s);
	unlink_path("db-journal");
	if (extra) {
		fsync_path(".");
		s = stage_next();
		stage_take_dir(s, ".");
		stage_seal(s);
	}
}

void workload_dentry(void)
{
	struct stage *s;
	int i;

	mkdir_path("d");
	mkdir_path("d2");
	write_file("db", 120, 64 * 1024, 0, 0);
	write_file("db-journal", 121, 8192, 0, 0); /* its name goes to another inode below */
	write_file("d/old", 122, 4096, 0, 0);
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);

	write_file("n1", 123, 10000, 0, 1);         /* new, fsync'ed: its name in a mark */
	write_file("u1", 124, 20000, 0, 0);         /* new, never fsync'ed */
	write_file("d/n2", 125, 300 * 1024, 0, 1);  /* in a subdirectory, with data blocks */
	write_file("d/u2", 126, 5000, 0, 0);
	s = stage_next();
	stage_take(s, "n1");
	stage_take(s, "d/n2");
	stage_seal(s);

	unlink_path("d/old"); /* its name, given to a new file: recovery drops the old one */
	write_file("d/old", 127, 6000, 0, 1);
	write_file("n1", 128, 3000, 10000, 1);      /* fsync'ed again, still new */
	s = stage_next();
	stage_take(s, "d/old");
	stage_take(s, "n1");
	stage_seal(s);

	unlink_path("db-journal"); /* the name the checkpoint knows, for another inode */
	for (i = 0; i < 4; i++)
		sqlite_commit(i, 0);
	sqlite_commit(4, 1);

	/* What no mark can say: a checkpoint each. */
	write_file("r", 160, 7000, 0, 1);
	rename_path("r", "r2");
	write_file("r2", 161, 100, 7000, 1);
	mkdir_path("nd");
	write_file("nd/f", 162, 9000, 0, 1);
	rmdir_path("d2");
	write_file("d2", 163, 4000, 0, 1);
	s = stage_next();
	stage_take(s, "r2");
	stage_take(s, "nd/f");
	stage_take(s, "d2");
	stage_seal(s);

	write_file("n3", 164, 50000, 0, 1); /* the last: a mark after those checkpoints */
	write_file("u3", 165, 3000, 0, 0);
	s = stage_next();
	stage_take(s, "n3");
	stage_seal(s);
}

/* Inline directories (INLINE_DENTRIES): small directories whose entries live in their inodes,
 * one grown past the area (block 0 written as a block, the area cleared) and shrunk back
 * (inline again, the block freed), names added to an inline directory by dentry marks
 * (recovery links them through the directory cache) and a directory moved between two
 * inline ones. Every flush boundary: the inode and the block must change together. */
void workload_idirs(void)
{
	struct stage *s;
	char rel[64];
	int i;

	mkdir_path("i");
	mkdir_path("j");
	write_file("i/copyright", 170, 900, 0, 0);
	write_file("i/changelog.Debian.gz", 171, 3000, 0, 0);
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);

	for (i = 0; i < 6; i++) { /* 6 names of 30 bytes: past the 128 bytes */
		snprintf(rel, sizeof(rel), "i/a-name-long-enough-to-grow-%d", i);
		write_file(rel, 172 + (uint32_t)i, 100, 0, 0);
	}
	fsync_path("i");
	s = stage_next();
	stage_take_dir(s, "i");
	stage_seal(s);

	for (i = 0; i < 6; i++) {
		snprintf(rel, sizeof(rel), "i/a-name-long-enough-to-grow-%d", i);
		unlink_path(rel);
	}
	fsync_path("i");
	s = stage_next();
	stage_take_dir(s, "i");
	stage_seal(s);

	write_file("j/n1", 180, 5000, 0, 1); /* a mark into an inline directory */
	write_file("i/n2", 181, 7000, 0, 1);
	s = stage_next();
	stage_take(s, "j/n1");
	stage_take(s, "i/n2");
	stage_seal(s);

	mkdir_path("i/sub");
	write_file("i/sub/f", 182, 2000, 0, 0);
	rename_path("i/sub", "j/sub");
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
}
