"""Row sources for tests: a statement answering rows 1..n, made on the server as
they stream out, on each server the tests run on."""

from __future__ import annotations


def _numbers(n: int) -> str:
    """MySQL: 1..n from JSON_TABLE over an array of n zeros (a row each, numbered)."""
    return f"JSON_TABLE(CONCAT('[', REPEAT('0,', {n - 1}), '0]'), '$[*]' COLUMNS (n FOR ORDINALITY))"


def series_sql(flavor: str, n: int) -> str:
    """SELECT ... AS n answering 1..n (``flavor``: postgres, mariadb or mysql8)."""
    if flavor == "postgres":
        return f"SELECT generate_series(1, {n}) AS n"
    if flavor == "mariadb":  # MariaDB's SEQUENCE engine streams its rows as generate_series does
        return f"SELECT seq AS n FROM seq_1_to_{n}"
    if n <= 2_000_000:
        return f"SELECT n FROM {_numbers(n)} AS t"
    assert n % 1_000_000 == 0, n
    return f"SELECT b.n FROM {_numbers(n // 1_000_000)} AS a CROSS JOIN {_numbers(1_000_000)} AS b"
