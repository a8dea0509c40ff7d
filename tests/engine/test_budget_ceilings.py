"""The budgets lockrace follows from a session's SET statements (nothing read back)
agree with what the server itself made of them: each flavor cuts a value to its own
range (MySQL's innodb_lock_wait_timeout goes up to 1073741824 s, MariaDB's to
100000000 s; MySQL raises 0 to 1).  Asked of the real server after each SET."""

from __future__ import annotations

VALUES = ("0", "1", "50", "31536000", "100000001", "1073741824", "2000000000")


async def test_followed_budgets_match_the_servers_values(mysql_backend, make_race):
    race = await make_race(mysql_backend, ("A",))
    limit = "max_statement_time" if mysql_backend.flavor == "mariadb" else "max_execution_time"
    # (max_execution_time is in ms, max_statement_time in seconds)
    for name in ("innodb_lock_wait_timeout", "lock_wait_timeout", limit):
        for value in VALUES:
            res = await race.run("A", f"SET SESSION {name} = {value}")
            assert res.outcome == "ok", (name, value, res.message)
            followed = {b.name: b.ms for b in race.sessions["A"].budgets}
            server = (await race.run("A", f"SELECT @@SESSION.{name}")).rows[0][0]
            ms = float(server) * (1.0 if name == "max_execution_time" else 1000.0)
            assert followed.get(name) == ms, (mysql_backend.flavor, name, value, followed.get(name), server)
    await race.run("A", "SET SESSION innodb_lock_wait_timeout = DEFAULT")
    await race.run("A", "SET SESSION lock_wait_timeout = DEFAULT")
