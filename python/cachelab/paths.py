"""Output directories: made and checked writable before the first file goes in, and an
OSError while writing one turned into a line that names the file.

`os.access` asks the kernel as it will decide: it says no for a read-only file system
even to root, for whom a directory's mode bits alone are no obstacle (then writes succeed,
and there is nothing to refuse). `writing` catches what a check cannot foresee (a disk
that fills, a file system remounted read-only midway).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cachelab.errors import UserError


def writable_dir(directory: Path, what: str) -> Path:
    """Creates `directory` if needed; a UserError naming it unless `what` (e.g. "the
    report") can be written there."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{exc.filename or directory}: cannot create a directory for {what} "
                        f"({exc.strerror or exc})") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UserError(f"{directory}: cannot write {what} here ({_why_not(directory)})")
    return directory


@contextmanager
def writing(target: Path, what: str) -> Iterator[None]:
    """Turns an OSError inside the block into a UserError naming the file (or `target`)."""
    try:
        yield
    except OSError as exc:
        raise UserError(f"{exc.filename or target}: cannot write {what} "
                        f"({exc.strerror or exc})") from None


def _why_not(directory: Path) -> str:
    try:
        read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return os.strerror(errno.EROFS if read_only else errno.EACCES)
