"""``lockrace locks``: the wait-for forest of whole servers, once or live (--watch)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

from ..runtime.options import ServerChoice
from .jsonout import snapshot_dict
from .sources import NoServer, Source, sources
from .text import lines

EXIT_OK, EXIT_UNUSABLE = 0, 2


def _first_line(exc: BaseException) -> str:
    args = exc.args
    if len(args) == 2 and isinstance(args[0], int):
        return f"ERROR {args[0]}: {args[1]}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Reader:
    """One source's connection, opened once and again after it was lost."""

    def __init__(self, source: Source):
        self.source = source
        self.conn = None

    def read(self):
        if self.conn is None:
            self.conn = self.source.connect()
        try:
            return self.source.read(self.conn)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None


def _connect_error(source: Source, exc: Exception) -> str:
    return f"cannot read {source.where}: {_first_line(exc)}"


@dataclass(frozen=True)
class LocksOptions:
    """``lockrace locks``, as the command line chose it."""

    engine: str | None = None  # None: what the DSNs given say, else the private servers running
    watch: bool = False
    interval: float = 1.0  # seconds between reads with ``watch``
    json: bool = False
    servers: ServerChoice = field(default_factory=ServerChoice)


def cmd_locks(args: LocksOptions) -> int:
    try:
        found = sources(args.engine, args.servers.dsn("postgres"), args.servers.dsn("mysql"),
                        args.servers.dsn("galera"), args.servers.dsn("postgres-standby"))
    except NoServer as exc:
        print(f"lockrace locks: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    readers = [Reader(s) for s in found]
    try:
        if not args.watch:
            snaps = []
            for r in readers:
                try:
                    snaps.append(r.read())
                except Exception as exc:
                    print(f"lockrace locks: {_connect_error(r.source, exc)}", file=sys.stderr)
                    return EXIT_UNUSABLE
            _print(snaps, args.json)
            return EXIT_OK
        return _watch(readers, args)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        for r in readers:
            r.close()


def _print(snaps, as_json: bool) -> None:
    if as_json:
        data = [snapshot_dict(s) for s in snaps]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2))
        return
    for n, s in enumerate(snaps):
        if n:
            print()
        print("\n".join(lines(s)))


def _frame(readers) -> tuple[list[str], list]:
    out, snaps = [], []
    for r in readers:
        try:
            snap = r.read()
            snaps.append(snap)
            out.extend(lines(snap))
        except Exception as exc:
            out.append(f"{r.source.where}: not readable now: {_first_line(exc)} (trying again)")
        out.append("")
    return out, snaps


def _watch(readers, args: LocksOptions) -> int:
    interval = args.interval
    if args.json:  # one JSON object (or list) per line, per read
        while True:
            _, snaps = _frame(readers)
            data = [snapshot_dict(s) for s in snaps]
            print(json.dumps(data[0] if len(data) == 1 else data), flush=True)
            time.sleep(interval)
    from rich.live import Live
    from rich.text import Text

    def render() -> Text:
        out, _ = _frame(readers)
        stamp = time.strftime("%H:%M:%S")
        out.append(f"read at {stamp}, every {interval:g} s; Ctrl-C to stop")
        return Text("\n".join(out))

    with Live(render(), auto_refresh=False, screen=False, transient=False) as live:
        while True:
            time.sleep(interval)
            live.update(render(), refresh=True)
