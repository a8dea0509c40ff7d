"""Start lockrace's embedded PostgreSQL and keep it up, to be used by DSN.

    python bench/embedded_pg_server.py [SECONDS]

Prints the server's libpq conninfo on its first line, then runs until
SIGINT/SIGTERM (or SECONDS), and stops the server.  For measuring ``--pg``
against the same PostgreSQL version lockrace runs itself
(bench/isolation_schedule.py --pg "$(head -1 FILE)").  Not used by the tests.
"""

from __future__ import annotations

import signal
import sys
import threading

from lockrace.servers.embedded_postgres import EmbeddedPostgres


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else None
    server = EmbeddedPostgres()
    server.start()
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        print(server.conninfo(), flush=True)
        done.wait(seconds)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
