"""Responsiveness of the lockrace app, measured in a real pseudo-terminal.

Starts ``python -m lockrace`` (embedded PostgreSQL 18) in a pty of 160x48,
the way a terminal would, and measures from the outside:

* start-up to interactive: spawn until the header names the server (the app
  sets it once the sessions are connected and the sandbox is ready);
* keypress-to-screen latency with three sessions blocked (B, C and D wait on
  A's row lock): time from writing one key to the pty until the terminal
  output contains the input line with that key echoed;
* CPU while idle-waiting: the app process's user+system time over a few
  seconds in which nothing is typed and the three sessions stay blocked;
* a large result: while C runs ``SELECT generate_series(1, 2000000)`` (kept:
  200 rows, the rest counted), keys typed into D are timed the same way, and
  the app's RSS is sampled throughout (growth over the RSS before it);
* quit during a fetch: C streams a 100,000,000-row SELECT, keys are timed
  while it runs, then Ctrl+Q until the process exits (the statement is
  cancelled on the server, connections closed, server stopped).

Targets: keypress-to-screen < 10 ms with three sessions blocked and < 50 ms
during a 2,000,000-row SELECT, RSS growth < 100 MiB, Ctrl+Q exit < 1 s, idle
CPU < 5 % of a core, start-up < 2 s.  Prints figures; it is a benchmark, not a
test (on a machine shared with other work the figures move).

    python bench/responsiveness.py [--keys 40] [--idle 5] [--engine mysql]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import sys
import termios
import time
from pathlib import Path

try:
    import pyte  # a VT100 screen, to wait for what the app shows
except ImportError:  # pragma: no cover
    sys.exit("bench/responsiveness.py needs pyte: pip install pyte (or pip install -e '.[bench]')")

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]")
COLS, ROWS = 160, 48
TICK = os.sysconf("SC_CLK_TCK")


class Terminal:
    """A child process on a pty, with everything it printed, ANSI-stripped and timestamped."""

    def __init__(self, argv: list[str], cols: int = COLS, rows: int = ROWS):
        pid, fd = pty.fork()
        if pid == 0:  # child
            os.chdir(ROOT)
            env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(ROOT))
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.text = ""
        self.raw_bytes = 0
        self._screen = pyte.Screen(cols, rows)  # what the terminal shows, for waiting on states
        self._stream = pyte.ByteStream(self._screen)
        self._unparsed: list[bytes] = []

    def pump(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return False
        self.raw_bytes += len(data)
        self._unparsed.append(data)
        self.text += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def wait_for(self, needle: str, timeout: float, since: int = 0) -> float:
        """Seconds until ``needle`` shows in the output after offset ``since``."""
        t0 = time.perf_counter()
        while needle not in self.text[since:]:
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{needle!r} did not appear within {timeout} s")
            self.pump(0.05)
        return time.perf_counter() - t0

    def drain(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.pump(max(0.0, end - time.perf_counter()))

    def send(self, data: str) -> None:
        os.write(self.fd, data.encode())

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

    def type_line(self, text: str) -> None:
        for ch in text:
            self.send(ch)
            self.drain(0.01)
        self.send("\r")

    def screen(self) -> str:
        """The terminal's screen now (parsed lazily: the key timings read the raw stream)."""
        for data in self._unparsed:
            self._stream.feed(data)
        self._unparsed.clear()
        return "\n".join(self._screen.display)

    def wait_for_screen(self, needle: str, timeout: float) -> float:
        t0 = time.perf_counter()
        while needle not in self.screen():
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{needle!r} not on screen within {timeout} s:\n{self.screen()}")
            self.pump(0.05)
        return time.perf_counter() - t0

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


def time_keys(term: Terminal, count: int, typed: str, pace: float = 0.08, sample=None,
              partial: bool = False) -> tuple[list[float], str]:
    """Type ``count`` keys one at a time into the focused input line; for each, the ms until
    the screen shows it.  ``typed`` is what that line already holds.  With ``partial`` the
    key alone counts (Textual may repaint only the changed cells of the line; the keys are
    capitals that nothing else on that screen prints)."""
    latencies = []
    alphabet = "XJVKWYQZ"
    for i in range(count):
        ch = alphabet[i % len(alphabet)]
        typed += ch
        mark = len(term.text)
        t0 = time.perf_counter()
        term.send(ch)
        token = typed[-10:]
        while token not in term.text[mark:] and not (partial and ch in term.text[mark:]):
            if time.perf_counter() - t0 > 10:
                raise TimeoutError(f"key {i} never reached the screen; the screen last showed: {term.text[-1500:]!r}")
            term.pump(0.002)
        latencies.append((time.perf_counter() - t0) * 1000)
        if sample is not None:
            sample()
        term.drain(pace)
    return latencies, typed


DRAW_BATCH = 20  # lockrace.app.session_panel.DRAW_BATCH, for the report


def summary(latencies: list[float]) -> str:
    if not latencies:
        return "no keys timed"
    ordered = sorted(latencies)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return (f"median {statistics.median(ordered):5.1f} ms, p95 {p95:5.1f} ms, max {max(ordered):5.1f} ms "
            f"over {len(ordered)} keys")


def quit_time(term: Terminal) -> tuple[float, int]:
    t_quit = time.perf_counter()
    term.send("\x11")  # ctrl+q
    while True:
        pid, status = os.waitpid(term.pid, os.WNOHANG)
        if pid:
            return time.perf_counter() - t_quit, os.waitstatus_to_exitcode(status)
        term.pump(0.01)
        if time.perf_counter() - t_quit > 30:
            raise TimeoutError("the app did not quit within 30 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=40, help="keystrokes to time (default 40)")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of idle waiting to measure CPU over")
    ap.add_argument("--profile", metavar="FILE", help="run the app under cProfile, writing stats to FILE")
    ap.add_argument("--poll-blocked", type=float, metavar="SECONDS",
                    help="experiment: the engine's monitor poll interval while every statement is blocked "
                         "(lockrace.engine.race.POLL_BLOCKED_S, 0.1 by default)")
    ap.add_argument("--size", default=f"{COLS}x{ROWS}", help=f"terminal size COLSxROWS (default {COLS}x{ROWS}; "
                    "from 170 columns the panels stand side by side)")
    ap.add_argument("--engine", choices=["postgres", "mysql"], default="postgres",
                    help="embedded PostgreSQL 18 (default) or a private MariaDB")
    args = ap.parse_args()
    cols, rows = (int(v) for v in args.size.lower().split("x"))
    series = {"postgres": "SELECT generate_series(1, {n});", "mysql": "SELECT seq FROM seq_1_to_{n};"}[args.engine]

    t_spawn = time.perf_counter()
    argv = [sys.executable, "-m", "lockrace", "--engine", args.engine]
    if args.poll_blocked is not None:
        argv = [sys.executable, "-c", "import sys, lockrace.engine.race as r; "
                f"r.POLL_BLOCKED_S = {args.poll_blocked!r}; from lockrace.cli import main; sys.exit(main([]))"]
    if args.profile:
        argv = [sys.executable, "-m", "cProfile", "-o", args.profile, "-m", "lockrace"]
    term = Terminal(argv, cols, rows)
    try:
        first_paint = term.wait_for("type SQL", 20)
        startup = term.wait_for(f"· engine: {args.engine}", 60)
        startup = time.perf_counter() - t_spawn
        term.drain(0.5)

        # A holds row 1; B, C and D queue behind it with no budget
        term.type_line("BEGIN;")  # A's input line has the focus at start
        term.drain(0.3)
        term.type_line("UPDATE accounts SET balance = 1 WHERE id = 1;")
        term.drain(0.3)
        for key in "bcd":
            mark = len(term.text)
            term.send("\t")  # Tab: next panel
            term.drain(0.1)
            term.type_line("UPDATE accounts SET balance = 2 WHERE id = 1;")
            term.wait_for("BLOCKED by A", 10, since=mark)
        blocked_at = time.perf_counter()
        term.drain(1.0)

        # idle CPU: nobody types, three sessions blocked, timeline and counters redrawing
        def idle_share(seconds: float) -> float:
            cpu0, wall0 = term.cpu_seconds(), time.perf_counter()
            term.drain(seconds)
            return (term.cpu_seconds() - cpu0) / (time.perf_counter() - wall0)

        idle_cpu = idle_share(args.idle)
        early = time.perf_counter() - blocked_at
        term.drain(max(0.0, 11.0 - early))  # waits past 10 s: the counters show whole seconds
        late_from = time.perf_counter() - blocked_at
        idle_cpu_late = idle_share(args.idle)

        # keypress-to-screen: type into A's input line, one key at a time
        term.send("\x1b[Z\x1b[Z\x1b[Z")  # Shift+Tab three times: back from D to A
        term.drain(0.3)
        typed = "QZ"
        for ch in typed:
            term.send(ch)
            term.drain(0.1)
        latencies, typed = time_keys(term, args.keys, typed)
        term.send("\x15")  # ctrl+u clears the input line
        term.drain(0.2)

        # quit with three sessions blocked
        quit_blocked_s, _ = quit_time(term)

        # a second app: a 2,000,000-row SELECT in A, keys typed into B meanwhile, RSS sampled
        term = Terminal(argv, cols, rows)
        term.wait_for(f"· engine: {args.engine}", 60)
        term.drain(0.5)
        rss_before = term.rss_mib()
        rss_peak = [rss_before]

        shown_at: list[float] = []

        def sample() -> None:
            rss_peak[0] = max(rss_peak[0], term.rss_mib())
            if not shown_at and "of 2,000,000 rows" in term.text[mark:]:
                shown_at.append(time.perf_counter())

        mark = len(term.text)
        for ch in series.format(n=2_000_000):  # A's input line has the focus at start
            term.send(ch)
            term.drain(0.01)
        term.drain(0.3)
        t_big = time.perf_counter()
        term.send("\r")
        term.wait_for_screen("A> SELECT", 10)
        term.send("\t")  # to B
        big_keys, _ = time_keys(term, args.keys, "", pace=0.03, sample=sample, partial=True)
        term.wait_for_screen("(first 200 of 2,000,000 rows)", 60)
        big_s = (shown_at[0] if shown_at else time.perf_counter()) - t_big
        for _ in range(10):
            sample()
            term.drain(0.1)
        rss_after = term.rss_mib()
        term.send("\x15")  # ctrl+u clears B's input line

        # a 100,000,000-row SELECT streaming in B: keys while it runs, then Ctrl+Q during it
        term.drain(0.3)
        term.type_line(series.format(n=100_000_000))
        term.wait_for_screen("B> SELECT", 10)
        term.drain(1.0)
        long_keys, _ = time_keys(term, 20, "", pace=0.05, sample=sample, partial=True)
        streaming = "running" in term.screen()
        quit_s, exit_code = quit_time(term)
    except BaseException:
        os.kill(term.pid, signal.SIGTERM)
        raise

    engine = "embedded PostgreSQL 18" if args.engine == "postgres" else "private MariaDB"
    load = os.getloadavg()[0]
    print(f"lockrace app responsiveness (pty {cols}x{rows}, {engine}, {os.cpu_count()} cores, load average {load:.1f})")
    print(f"  first screen (\"starting …\")        {first_paint * 1000:7.0f} ms")
    print(f"  start-up to interactive             {startup * 1000:7.0f} ms   target < 2000 ms")
    print(f"  keypress-to-screen, 3 blocked       {summary(latencies)}   target < 10 ms")
    print(f"  CPU while idle-waiting (3 blocked)  {idle_cpu * 100:7.1f} % of a core, seconds 1-{early:.0f} of the waits"
          f"   target < 5 %")
    print(f"                                      {idle_cpu_late * 100:7.1f} % of a core, seconds {late_from:.0f}-"
          f"{late_from + args.idle:.0f} of the waits")
    print(f"  quit (Ctrl+Q), 3 blocked           {quit_blocked_s * 1000:7.0f} ms to process exit")
    print(f"  2,000,000-row SELECT                {big_s * 1000:7.0f} ms from Enter until '(first 200 of 2,000,000 rows)' shows "
          f"(fetched on a worker thread, drawn {DRAW_BATCH} lines per loop turn)")
    print(f"    keypress-to-screen meanwhile      {summary(big_keys)}   target < 50 ms")
    print(f"    RSS                               {rss_before:.0f} MiB before, peak {rss_peak[0]:.0f} MiB "
          f"(+{rss_peak[0] - rss_before:.0f}), {rss_after:.0f} MiB after   target < +100 MiB")
    print(f"  100,000,000-row SELECT streaming    keypress-to-screen {summary(long_keys)}"
          f"{'' if streaming else '  (it had finished before the keys)'}")
    print(f"    quit (Ctrl+Q) during it           {quit_s * 1000:7.0f} ms to process exit, status {exit_code}"
          f"   target < 1000 ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
