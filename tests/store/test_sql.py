"""harness/store/sql.py: values reach DuckDB as parameters, and a path written into SQL
(where DuckDB takes no parameter) names exactly that file, whatever it holds."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from harness.store.sql import Params, path_literal

HOSTILE = "it's \"quoted\"\nline two\\ $p0 ? -- ; DROP TABLE t; '"


def test_each_distinct_value_is_one_parameter_and_reaches_the_engine_as_it_is():
    p = Params()
    assert [p("a"), p("b"), p("a"), p(["a"]), p(("a",)), p(1), p(HOSTILE)] == [
        "$p0",
        "$p1",
        "$p0",
        "$p2",
        "$p2",
        "$p3",
        "$p4",
    ]
    assert p.values == {"p0": "a", "p1": "b", "p2": ["a"], "p3": 1, "p4": HOSTILE}
    con = duckdb.connect()
    q = Params()
    row = con.execute(
        f"SELECT {q(HOSTILE)}, regexp_full_match({q('x')}, {q('[a-z]')}), "
        f"list_position({q(['u', 'v'])}::VARCHAR[], 'v')",
        q.values,
    ).fetchone()
    assert row == (HOSTILE, True, 2)


def test_a_hostile_path_written_into_copy_and_a_view_names_exactly_that_file(tmp_path: Path):
    folder = tmp_path / HOSTILE
    folder.mkdir()
    one, two = folder / "one's.parquet", folder / "two\n.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1 AS x) TO {path_literal(one)} (FORMAT parquet)")
    con.execute(f"COPY (SELECT 2 AS x) TO {path_literal(str(two))} (FORMAT parquet)")
    assert sorted(p.name for p in folder.iterdir()) == ["one's.parquet", "two\n.parquet"]
    con.execute(f"CREATE VIEW v AS SELECT x FROM read_parquet({path_literal([one, two])})")
    assert con.execute("SELECT x FROM v ORDER BY x").fetchall() == [(1,), (2,)]
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)


def test_a_path_with_a_nul_is_refused():
    with pytest.raises(ValueError, match="NUL"):
        path_literal("a\0b")
