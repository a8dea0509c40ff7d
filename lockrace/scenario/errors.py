"""The one error every scenario reader raises for input it cannot use."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class ScenarioError(Exception):
    """A malformed scenario or spec file; prints as ``file:line: what is wrong``."""

    def __init__(self, path: str | Path | None, line: int | None, message: str):
        self.path = str(path) if path is not None else "<input>"
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


MAX_SOURCE_BYTES = 4 * 1024 * 1024
"""The largest scenario or spec file lockrace reads (PostgreSQL's largest
isolation spec is under 40 KB)."""


def read_source(path: str | Path) -> str:
    """A scenario or spec file's text, or ScenarioError saying why not.
    A UTF-8 byte-order mark at the start is dropped."""
    data = read_source_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ScenarioError(path, None, f"not UTF-8 text ({exc.reason})") from None


def read_source_bytes(path: str | Path) -> bytes:
    """A scenario, spec or expected-output file's bytes, or ScenarioError.

    Only a regular file is read, and at most MAX_SOURCE_BYTES of it: a FIFO,
    a device such as /dev/zero, a directory or a huge file gets one clear
    error instead of a hang.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ScenarioError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ScenarioError(path, None, f"not a regular file ({_kind(info.st_mode)}): give a .race or .spec file")
        if info.st_size > MAX_SOURCE_BYTES:
            raise ScenarioError(path, None, f"too large for a scenario ({info.st_size} bytes; "
                                            f"at most {MAX_SOURCE_BYTES // (1024 * 1024)} MiB)")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            data = fh.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(path, None, f"cannot read: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_SOURCE_BYTES:  # it grew while being read
        raise ScenarioError(path, None, f"too large for a scenario (more than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB)")
    return data


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def printable(text: str) -> str:
    """``text`` for an error message: control characters (which could drive the
    terminal) shown as escapes."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
