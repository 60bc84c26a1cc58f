#!/usr/bin/env bash
# sqlite_powercut.sh BUILD_DIR - SQLite, a program nobody here wrote, cut off by power loss.
# Each round: a fresh image mounted with -o dev_direct, a database in WAL mode with
# synchronous=FULL (or with the rollback journal and synchronous=EXTRA, which also syncs the
# directory once the journal is deleted) taking one-row transactions, the number of each
# committed row written to a file outside zlfs once its COMMIT returned; after a random
# while (every third round: once the writer has stopped after a commit, so that nothing but
# that commit's fsync made its last bytes durable) the daemon is killed (-9) and the emulator drops every unflushed write, or a number
# of them drawn from a seed (zlfs-emu powercut). Then the image must mount, `PRAGMA integrity_check`
# say ok, and the table hold every row whose commit returned, in order, and at most the
# one being committed at the cut; fsck.zlfs -n clean after the unmount. The WAL rounds let
# the log wrap (its rewrites in place go through the partial blocks held in memory, fs/file/
# tailbuf.c); the rollback rounds create, sync and delete a journal per commit.
# Exit 77 (skipped) without /dev/fuse or Python's sqlite3.
set -uo pipefail
BUILD=${1:?usage: sqlite_powercut.sh BUILD_DIR}
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/sqlite-powercut
BIN=$BUILD/bin
ROUNDS=${SQLITE_POWERCUT_ROUNDS:-6}
[[ -c /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
python3 -c 'import sqlite3' 2>/dev/null || { echo "SKIP: no python3 sqlite3"; exit 77; }

# The writer: rows 1, 2, ... each its own transaction; after each COMMIT the row's number
# goes to DONE (outside zlfs, flushed), so DONE's last line was durable on zlfs by then. Run
# as its own process (not a shell function's subshell), so that kill -9 reaches it.
WRITER_PY='import os, sqlite3, sys, time
path, journal, done = sys.argv[1:4]
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode=%s" % journal)
# FULL leaves the rollback journal'"'"'s deletion, which is the commit in DELETE mode, without a
# directory fsync: a cut may then roll the last commit back, on any filesystem. EXTRA syncs it.
db.execute("PRAGMA synchronous=%s" % ("FULL" if journal == "WAL" else "EXTRA"))
db.execute("CREATE TABLE IF NOT EXISTS t(n INTEGER PRIMARY KEY, body TEXT NOT NULL)")
out = open(done, "a")
n = 0
while not os.path.exists(done + ".stop"):
    n += 1
    db.execute("INSERT INTO t(n, body) VALUES (?, ?)", (n, ("%d;" % n) * (40 + n % 300)))
    out.write("%d\n" % n)
    out.flush()
    os.fsync(out.fileno())
open(done + ".stopped", "w").close()  # idle, the database open: the cut finds it at rest
while True:
    time.sleep(3600)
'

check() { # DB DONE: what the database holds after the cut
	python3 - "$1" "$2" <<'PY'
import sqlite3, sys
path, done = sys.argv[1:3]
lines = open(done).read().split()
committed = int(lines[-1]) if lines else 0
db = sqlite3.connect(path, isolation_level=None)
ok = db.execute("PRAGMA integrity_check").fetchone()[0]
if ok != "ok":
    sys.exit("integrity_check: %s" % ok)
if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 't'").fetchone():
    # the CREATE TABLE is a transaction of its own: cut before it returned (a slow start on
    # a loaded machine), there is no table, and that is right only if no row's commit returned
    if committed:
        sys.exit("no table after the cut, %d commits had returned" % committed)
    print("no table yet, no commit had returned")
    sys.exit(0)
rows = db.execute("SELECT n, body FROM t ORDER BY n").fetchall()
for i, (n, body) in enumerate(rows):
    if n != i + 1:
        sys.exit("rows not 1..N in order: %d rows, row %d is %d" % (len(rows), i + 1, n))
    if body != ("%d;" % n) * (40 + n % 300):
        sys.exit("row %d has the wrong body" % n)
if not committed <= len(rows) <= committed + 1:
    sys.exit("%d rows after the cut, %d commits had returned" % (len(rows), committed))
print("%d rows, %d commits had returned" % (len(rows), committed))
PY
}

fail=0
for ((r = 1; r <= ROUNDS; r++)); do
	journal=$([[ $((r % 2)) == 1 ]] && echo WAL || echo DELETE)
	seed=$((1000 + r))
	rm -rf "$T"
	mkdir -p "$T/mnt"
	"$BIN/zlfs-emu" create "$T/s.img" --size 256M --zone-size 8M --max-open 14 \
		--max-active 14 >/dev/null && "$BIN/mkfs.zlfs" -q "$T/s.img" || { echo "FAIL: mkfs"; exit 1; }
	"$BIN/zlfs" -f -o dev_direct "$T/s.img" "$T/mnt" 2>"$T/daemon.log" &
	daemon=$!
	for _ in $(seq 100); do mountpoint -q "$T/mnt" && break; sleep 0.1; done
	mountpoint -q "$T/mnt" || { echo "FAIL: mount"; cat "$T/daemon.log"; exit 1; }
	: >"$T/done"
	python3 -c "$WRITER_PY" "$T/mnt/db" "$journal" "$T/done" 2>/dev/null &
	w=$!
	# long enough for the WAL to wrap (1,000 frames) in most rounds
	sleep "$(awk -v s="$seed" 'BEGIN { srand(s); printf "%.2f", 2 + 3 * rand() }')"
	if ((r % 3 == 1)); then # at rest: the last commit's fsync alone made it durable
		touch "$T/done.stop"
		for _ in $(seq 100); do [[ -e $T/done.stopped ]] && break; sleep 0.1; done
	fi
	# The writer stops first, as at a real power cut: with the daemon gone before it, the
	# writer would see its requests fail, and SQLite takes a directory it cannot open (its
	# journal deleted, the directory's fsync to come) as one it need not sync: the commit
	# returns, and the power cut rolls it back (2 rounds in 100 did).
	kill -STOP "$w" 2>/dev/null
	kill -9 "$daemon"
	wait "$daemon" 2>/dev/null
	kill -9 "$w" 2>/dev/null # one at rest would wait for ever
	wait "$w" 2>/dev/null
	fusermount3 -uz "$T/mnt" 2>/dev/null
	# every unflushed write lost in odd rounds of each mode, a drawn number of them in even
	cut=$([[ $(((r + 1) / 2 % 2)) == 1 ]] && echo "" || echo "--seed $seed")
	"$BIN/zlfs-emu" powercut "$T/s.img" $cut >/dev/null || { echo "FAIL: powercut"; fail=1; continue; }
	"$BIN/zlfs" -f -o dev_direct "$T/s.img" "$T/mnt" 2>>"$T/daemon.log" &
	daemon=$!
	for _ in $(seq 100); do mountpoint -q "$T/mnt" && break; sleep 0.1; done
	if ! mountpoint -q "$T/mnt"; then
		echo "FAIL: round $r ($journal): no mount after the cut"; tail -5 "$T/daemon.log"; fail=1; continue
	fi
	if msg=$(check "$T/mnt/db" "$T/done" 2>&1); then
		echo "round $r ($journal, ${cut:-all unflushed writes lost}): $msg"
	else
		echo "FAIL: round $r ($journal, ${cut:-all unflushed writes lost}): $msg"; fail=1
	fi
	fusermount3 -u "$T/mnt"
	wait "$daemon"
	"$BIN/fsck.zlfs" -n "$T/s.img" >"$T/fsck.log" 2>&1 ||
		{ echo "FAIL: round $r: fsck"; tail -5 "$T/fsck.log"; fail=1; }
done
exit $fail
