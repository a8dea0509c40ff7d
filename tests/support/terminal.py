"""The app in a pseudo-terminal, as a user starts it, and the checks every
"a signal ends the app" test makes."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from support.paths import REPO



class Terminal:
    """``lockrace`` (the app) in a pseudo-terminal of ``size`` (rows, columns)."""

    def __init__(self, args: list[str], env: dict, size=(48, 160)):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
        self.proc = subprocess.Popen([sys.executable, "-m", "lockrace", *args], cwd=REPO,
                                     env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.screen = bytearray()

    def read_until(self, needle: bytes, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.screen:
                return True
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    self.screen.extend(os.read(self.master, 65536))
                except OSError:
                    return needle in self.screen
        return needle in self.screen

    def settle(self, seconds: float) -> None:
        """Keep reading (as a terminal does) for ``seconds``."""
        self.read_until(b"\x00never", seconds)

    def signal_and_wait(self, sig: int, limit: float = 30.0) -> tuple[int | None, float]:
        """Send ``sig``; keep reading the screen while the app draws its last frames
        (a terminal that stops reading would block the app's writer); return the exit
        status and the seconds from the signal to the exit."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        while self.proc.poll() is None and time.monotonic() - t0 < limit:
            self.read_until(b"\x00never", 0.05)
        took = time.monotonic() - t0
        code = self.proc.poll()
        self.settle(0.3)
        return code, took

    @property
    def text(self) -> str:
        return self.screen.decode(errors="replace")

    def assert_ended_cleanly(self, code: int | None, took: float, limit: float) -> None:
        """Ended by a signal: exit 130 within ``limit`` s with lockrace's one line about
        it, no traceback, the terminal given back."""
        text = self.text
        assert code == 130, code
        assert "lockrace: interrupted; statements cancelled, servers stopped" in text, text[-3000:]
        assert took <= limit, f"took {took:.2f} s: " + text[-3000:]
        assert "Traceback" not in text
        assert "\x1b[?1049l" in text[-4000:], "the terminal was not given back (alternate screen)"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        os.close(self.master)
