"""Scenario builders: the small tables the tests lock rows of, written once."""

from __future__ import annotations


def accounts(*balances: int, innodb: bool = False) -> list[str]:
    """``accounts (id, balance)`` with one row per balance, ids 1, 2, ...: the
    statements to give ``backend.run_admin``. ``innodb``: say ENGINE=InnoDB (MariaDB/MySQL)."""
    balances = balances or (100,)
    rows = ", ".join(f"({i}, {b})" for i, b in enumerate(balances, 1))
    table = "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)" + (" ENGINE=InnoDB" if innodb else "")
    return [table, f"INSERT INTO accounts VALUES {rows}"]


def accounts_setup(*balances: int, innodb: bool = False) -> str:
    """The same table as the lines of a ``.race`` file's ``setup:`` block."""
    return "".join(f"    {sql};\n" for sql in accounts(*balances, innodb=innodb))
