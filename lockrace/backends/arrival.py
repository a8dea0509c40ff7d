"""When an answer arrived, even while the event loop was busy.

The event loop reads a short PostgreSQL answer itself (see
``postgres._LoopRead``), woken by the socket like a bare driver call.  But
the loop may be busy elsewhere when the answer comes (the app redraws its
screen for tens of ms), and its late look must not stretch the statement's
time.  So a session's socket is in asynchronous mode (O_ASYNC): the kernel
signals the loop's thread as data arrives, and the handler below notes the
time.  Python runs a signal handler between two bytecodes, or at once if the
thread sleeps in a system call, so the note is taken within microseconds of
the data's arrival, busy loop or not, and no second thread has to wake up (on
a virtual machine, each thread hop costs a CPU wake-up, 0.1-0.2 ms after a
quiet spell).

Each watched socket gets a real-time signal of its own (F_SETSIG), so the
handler knows whose data came without asking the kernel, and keeps the first
arrival since the reader last looked: an answer's ReadyForQuery that comes a
moment after its error does not move the note.

Linux only (F_SETOWN_EX directs the signal to the loop's thread, so no other
thread sees its system calls interrupted), and only on the main thread, where
Python runs signal handlers.  Elsewhere, or with every signal of the range
in use, ``watch`` returns None and the session's thread reads and times the
answer instead.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import sys
import threading
from time import perf_counter_ns

_F_SETSIG = 10  # linux/fcntl.h
_F_SETOWN_EX = 15
_F_OWNER_TID = 0

# Real-time signals from the top of the range down (the bottom is where other
# libraries usually take theirs); one per watched socket.
_FREE: list[int] = (list(range(signal.SIGRTMIN + 8, signal.SIGRTMAX + 1))
                    if hasattr(signal, "SIGRTMIN") and sys.platform.startswith("linux") else [])
_first: dict[int, int] = {}  # signal -> perf_counter_ns() of the first arrival since the last take
_ours: set[int] = set()  # signals whose handler is ours


def _on_arrival(signum, frame) -> None:
    if not _first.get(signum):
        _first[signum] = perf_counter_ns()


def supported() -> bool:
    return bool(_FREE) and threading.current_thread() is threading.main_thread()


def watch(fd: int) -> int | None:
    """Note data arriving on socket ``fd`` from now on: the signal that stands for
    it (pass it to ``take`` and ``unwatch``); None where this cannot be done (see
    the module), nothing changed then."""
    if not supported():
        return None
    signum = _FREE.pop()
    try:
        if signum not in _ours:
            if signal.getsignal(signum) not in (signal.SIG_DFL, None):
                raise ValueError("in use")  # someone else's: leave it to them
            signal.signal(signum, _on_arrival)
            _ours.add(signum)
        _first[signum] = 0
        fcntl.fcntl(fd, _F_SETOWN_EX, struct.pack("ii", _F_OWNER_TID, threading.get_native_id()))
        fcntl.fcntl(fd, _F_SETSIG, signum)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    except (OSError, ValueError):
        _FREE.append(signum)
        return None
    return signum


def take(signum: int) -> int:
    """The first arrival noted since the last ``take`` (perf_counter_ns; 0: none)."""
    seen = _first.get(signum, 0)
    _first[signum] = 0
    return seen


def unwatch(fd: int, signum: int) -> None:
    """Stop noting arrivals on ``fd`` (before the socket is closed).  The signal's
    handler stays ours: a signal already on its way finds it."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_ASYNC)
        fcntl.fcntl(fd, _F_SETSIG, 0)
    except OSError:
        pass  # the socket is gone already
    _first[signum] = 0
    _FREE.append(signum)
