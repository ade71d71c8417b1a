"""Reading files a candidate could have written, from a privileged process, without being led anywhere.

The candidate owns its sandbox: any name in it may be a symbolic link (to the user's API key, a root-only
host file), a FIFO that blocks the reader, a hard link, or a file of many GB. Every read of such a file
by the trusted side goes through here: the directory and the file are opened without following links
(`O_NOFOLLOW` on both, the file relative to the directory's descriptor, so no path is resolved twice),
the file must be a regular file with one link, and the read is bounded.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeFile(OSError):
    """The candidate's file is not something the trusted side reads."""


def _open(directory: Path, name: str) -> int:
    if not name or "/" in name or name in (".", ".."):
        raise UnsafeFile(f"{name!r} is not a plain file name")
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as e:
            if e.errno == 40:  # ELOOP: the name is a symbolic link
                raise UnsafeFile(f"{name}: a symbolic link, not read") from e
            raise
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise UnsafeFile(f"{name}: not a regular file with one link, not read")
    return fd


def read_bounded(directory: Path, name: str, limit: int) -> bytes:
    """The whole file, refused (UnsafeFile) when it is larger than `limit` bytes."""
    fd = _open(directory, name)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafeFile(f"{name}: {size} bytes, over the {limit}-byte bound")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 24))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:  # it grew while read
            raise UnsafeFile(f"{name}: over the {limit}-byte bound")
        return data
    finally:
        os.close(fd)


def read_tail(directory: Path, name: str, n: int = 2000) -> str:
    """The last `n` bytes as text; empty when the file is absent or not safe to read."""
    try:
        fd = _open(directory, name)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - n), os.SEEK_SET)
        return os.read(fd, n).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


__all__ = ["UnsafeFile", "read_bounded", "read_tail"]
