#!/usr/bin/env python3
"""tools/lib/fsck_tree.py - the tree tools/bench-fsck checks (run, not imported).

  fsck_tree.py ROOT FILES PERDIR SMALL_EVERY SMALL_BYTES

Creates FILES files under ROOT in directories of PERDIR (ROOT/dK/fN), every SMALL_EVERY-th
one holding SMALL_BYTES bytes and the rest empty, the same names and sizes whatever ROOT's
filesystem is, and prints the seconds taken.
"""
import os
import sys
import time


def main():
    root, files, perdir, every, size = sys.argv[1], *map(int, sys.argv[2:6])
    data = b"z" * size
    t0 = time.monotonic()
    for n in range(files):
        if n % perdir == 0:
            os.mkdir(f"{root}/d{n // perdir:05d}")
        fd = os.open(f"{root}/d{n // perdir:05d}/f{n:07d}",
                     os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        if every and n % every == 0:
            os.write(fd, data)
        os.close(fd)
    print(f"{time.monotonic() - t0:.1f}")


if __name__ == "__main__":
    main()
