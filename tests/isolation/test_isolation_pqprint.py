"""Result sets in isolationtester's format.

The reference is libpq's own PQprint (the function isolationtester calls),
called through ctypes on real results from the embedded PostgreSQL: the same
libpq psycopg loaded, so the PGresult pointers are its own.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from pathlib import Path

import psycopg
import pytest
from psycopg import pq

from lockrace.isolation.pqprint import format_result


def test_examples_from_upstream_expected_files():
    assert format_result([b"id", b"data"], [(b"1", b"x")]) == b"id|data\n--+----\n 1|x   \n(1 row)\n\n"
    assert format_result([b"accountid", b"balance"], [(b"checking", b"600"), (b"savings", b"600")]) == (
        b"accountid|balance\n---------+-------\nchecking |    600\nsavings  |    600\n(2 rows)\n\n")
    # a void result: one empty value, column stays "numeric"
    assert format_result([b"pg_advisory_lock"], [(b"",)]) == (
        b"pg_advisory_lock\n----------------\n                \n(1 row)\n\n")
    # NULLs print as blanks and do not make a column textual
    assert format_result([b"id", b"txt"], [(b"1000000", None)]) == b"     id|txt\n-------+---\n1000000|   \n(1 row)\n\n"
    assert format_result([b"a"], []) == b"a\n-\n(0 rows)\n\n"
    assert format_result([], []) == b""


def _libpq() -> ctypes.CDLL:
    import psycopg_binary

    libs = Path(psycopg_binary.__file__).resolve().parent.parent / "psycopg_binary.libs"
    found = sorted(libs.glob("libpq-*.so*")) if libs.is_dir() else []
    if pq.__impl__ != "binary" or not found:
        pytest.skip("psycopg is not using its bundled libpq; cannot call the same PQprint")
    return ctypes.CDLL(str(found[0]))


class _PrintOpt(ctypes.Structure):
    _fields_ = [("header", ctypes.c_char), ("align", ctypes.c_char), ("standard", ctypes.c_char),
                ("html3", ctypes.c_char), ("expanded", ctypes.c_char), ("pager", ctypes.c_char),
                ("fieldSep", ctypes.c_char_p), ("tableOpt", ctypes.c_char_p), ("caption", ctypes.c_char_p),
                ("fieldName", ctypes.POINTER(ctypes.c_char_p))]


def _pqprint(lib: ctypes.CDLL, res: pq.PGresult) -> bytes:
    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    lib.PQprint.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_PrintOpt)]
    opt = _PrintOpt(header=b"\x01", align=b"\x01", fieldSep=b"|")
    with tempfile.TemporaryFile() as tmp:
        fp = libc.fdopen(os.dup(tmp.fileno()), b"w")
        lib.PQprint(fp, res.pgresult_ptr, ctypes.byref(opt))
        libc.fclose(fp)
        tmp.seek(0)
        return tmp.read()


QUERIES = [
    "SELECT 1 AS a, 'x' AS b",
    "SELECT * FROM (VALUES (1, 'foo', NULL::text), (22, NULL, ''), (-3, 'bar', 'z')) v(id, name, note)",
    "SELECT 1.5e3::float8 AS f, '1e5' AS e_text, 'E1' AS starts_e, '12-' AS trailing_dash, ' 7' AS spaced",
    "SELECT NULL::int AS only_null, '' AS only_empty, true AS t",
    "SELECT 'ünïcödé' AS wide, 'é' AS e, 42 AS n",
    "SELECT now() - now() AS iv, ARRAY[1,2] AS arr, '{\"a\": 1}'::jsonb AS js",
    "SELECT x AS n, repeat('ab', x) AS s FROM generate_series(0, 5) x",
    "SELECT 1 AS a WHERE false",
    "SELECT",
    "SELECT '-' AS minus, '.' AS dot, 'e' AS lone_e, '0.5' AS half",
]


@pytest.mark.parametrize("query", QUERIES)
def test_same_bytes_as_libpq_pqprint(pg_server, query):
    lib = _libpq()
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        res = conn.pgconn.exec_(query.encode())
        assert res.status == pq.ExecStatus.TUPLES_OK, res.error_message
        columns = [res.fname(j) for j in range(res.nfields)]
        rows = [tuple(res.get_value(i, j) for j in range(res.nfields)) for i in range(res.ntuples)]
        assert format_result(columns, rows) == _pqprint(lib, res)
