"""The terminal going away under the app.

When a terminal emulator or an ssh session ends, the kernel sends SIGHUP to the
terminal's controlling process, and lockrace ends the orderly way (exitguard).  A
lockrace started without that terminal as its controlling one (``setsid``, a
supervisor, a program driving it through a pty) gets no signal: its input only
reports a hang-up, which Textual's input thread would read as nothing, again and
again, at full speed, for ever.  The app checks its input twice a second and, once
the terminal is gone, sends itself the SIGHUP it missed: the same way out (statements
cancelled, sandbox dropped, private servers stopped) as a closed terminal's.
"""

from __future__ import annotations

import os
import select
import signal
import sys

_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def input_terminal() -> int | None:
    """The file descriptor of the app's terminal input (None: it reads no terminal)."""
    stdin = sys.__stdin__
    if stdin is None:
        return None
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):
        return None
    return fd if os.isatty(fd) else None


def terminal_gone(fd: int) -> bool:
    """Whether the other end of ``fd``'s terminal has closed (a hang-up), without reading it."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # a hang-up or an error is reported whatever the mask
    return any(events & _GONE for _, events in poller.poll(0))


class TerminalWatch:
    """Called periodically by the app: the first time the terminal is found gone, SIGHUP."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.fired = False

    def check(self) -> None:
        if not self.fired and terminal_gone(self.fd):
            self.fired = True
            os.kill(os.getpid(), signal.SIGHUP)
