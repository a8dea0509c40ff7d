"""How lockrace ends on SIGINT, SIGTERM, SIGHUP or SIGQUIT, whatever the server is doing.

SIGQUIT (Ctrl-\\ in a terminal) would otherwise end the process at once, leaving
a private server's temp dir and a DSN server's sandbox behind: it is one more
way to ask lockrace to stop, no different from the others.

The first signal starts the ordinary way out (cancel statements through the
server, roll back prepared and open transactions, close connections, stop the
private servers), each step with a short deadline.  A watchdog thread bounds
the whole: ``grace_s`` after the signal it stops the private servers itself
(SIGKILL if one does not stop at once: a frozen server), gives the terminal
back if the app had it, says so on stderr and ends the process with 130.  No
worker thread stuck inside a driver call on a server that does not answer can
hold the exit (the interpreter would otherwise join such threads for ever).

Imports nothing from Textual.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

INTERRUPTED_LINE = "lockrace: interrupted; statements cancelled, servers stopped"
# every signal that ends lockrace the orderly way (SIGINT first: the app's own)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2  # every verdict held / one failed / unusable input
EXIT_INTERRUPTED = 130

# What Textual switches on and must be switched off if the app cannot do it itself:
# alternate screen, hidden cursor, mouse reporting, bracketed paste.
_TERMINAL_RESET = b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?25h\x1b[?1049l"


class ExitGuard:
    def __init__(self, grace_s: float, terminal: bool = False) -> None:
        self.grace_s = grace_s
        self.fired = False
        self.stoppers: list = []  # objects with stop_now(): servers to stop in any case
        self._once = threading.Lock()
        self._termios: list | None = None
        stdin = sys.__stdin__  # None when Python runs without one
        if terminal and stdin is not None:
            with contextlib.suppress(Exception):
                import termios

                self._termios = termios.tcgetattr(stdin.fileno())

    def install(self, loop, task) -> None:
        """``lockrace run``: the signals cancel ``task`` on ``loop`` and start the watchdog."""
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.fire, task)

    def chain_sigint(self) -> None:
        """The app: keep the SIGINT handler in place (asyncio's: cancel the app's
        main task) and start the watchdog before it runs.  SIGTERM, SIGHUP and
        SIGQUIT are re-delivered as SIGINT (cli.main)."""
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum, frame):
            self.fire()
            if callable(previous):
                previous(signum, frame)
            else:
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, handler)

    def fire(self, task=None) -> None:
        if self.fired:
            return
        self.fired = True
        threading.Thread(target=self._watchdog, name="lockrace-exit", daemon=True).start()
        if task is not None:
            task.cancel()

    def _watchdog(self) -> None:
        time.sleep(self.grace_s)
        self.exit_now()

    def exit_now(self) -> None:
        """Stop what lockrace started, give the terminal back, say so, leave now."""
        if not self._once.acquire(blocking=False):
            time.sleep(60)  # the other caller (watchdog or main thread) is ending the process
            os._exit(EXIT_INTERRUPTED)
        for stopper in self.stoppers:
            with contextlib.suppress(Exception):
                stopper.stop_now()
        from .servers.process import stop_all

        stop_all(0.2)  # and any server still starting
        if self._termios is not None:
            with contextlib.suppress(Exception):
                import termios

                for fd in (1, 2):
                    if os.isatty(fd):
                        os.write(fd, _TERMINAL_RESET)
                        break
                if sys.__stdin__ is not None:
                    termios.tcsetattr(sys.__stdin__.fileno(), termios.TCSANOW, self._termios)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(INTERRUPTED_LINE, file=sys.stderr, flush=True)
        os._exit(EXIT_INTERRUPTED)


app_guard: ExitGuard | None = None
"""The app's guard (set by cli before the app runs, armed once its loop runs)."""
