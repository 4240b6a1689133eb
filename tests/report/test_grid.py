"""The torch x lightning grid and the first/last reproducing release along each axis."""

from __future__ import annotations

from harness.report.render.grid import GridCell, axis_ranges, make_grid


def cell(torch: str, lightning: str, status: str) -> GridCell:
    return GridCell(torch, lightning, status, status[0])


def test_grid_orders_versions_as_versions_and_leaves_unmeasured_pairs_empty() -> None:
    grid = make_grid(
        [
            cell("2.10.0", "2.6.6", "ok"),
            cell("2.4.1", "2.6.6", "reproduced"),
            cell("2.4.1", "1.9.5", "unsupported"),
            cell("1.13.1", "1.9.5", "ok"),
        ]
    )
    assert grid.torches == ("1.13.1", "2.4.1", "2.10.0")  # 2.10 after 2.4, not before
    assert grid.lightnings == ("1.9.5", "2.6.6")
    assert grid.text("1.13.1", "2.6.6") == ""  # never measured: never inferred
    assert grid.text("2.4.1", "2.6.6") == "r"


def test_two_environments_of_one_pair_are_both_shown() -> None:
    grid = make_grid([cell("2.4.1", "2.6.6", "reproduced"), cell("2.4.1", "2.6.6", "ok")])
    assert grid.text("2.4.1", "2.6.6") == "r o"


def test_first_and_last_along_each_axis_and_a_gap_is_reported() -> None:
    grid = make_grid(
        [
            cell("2.4.1", "1.9.5", "unsupported"),
            cell("2.4.1", "2.0.9", "reproduced"),
            cell("2.4.1", "2.5.6", "ok"),  # fixed ...
            cell("2.4.1", "2.6.6", "reproduced"),  # ... and back: not contiguous
            cell("2.3.1", "2.6.6", "ok"),
            cell("2.13.0", "2.6.6", "reproduced"),
        ]
    )
    per_torch, per_lightning = axis_ranges(grid)
    at_241 = next(r for r in per_torch if r.fixed == "2.4.1")
    assert (at_241.first, at_241.last) == ("2.0.9", "2.6.6")
    assert at_241.measured == ("1.9.5", "2.0.9", "2.5.6", "2.6.6")
    assert not at_241.contiguous
    at_266 = next(r for r in per_lightning if r.fixed == "2.6.6")
    assert (at_266.first, at_266.last) == ("2.4.1", "2.13.0")
    assert at_266.contiguous  # ok at 2.3.1, then reproduced at every torch measured after
    at_231 = next(r for r in per_torch if r.fixed == "2.3.1")
    assert at_231.first is None and at_231.contiguous


def test_a_flaky_pair_is_not_a_hit() -> None:
    grid = make_grid([cell("2.4.1", "2.6.6", "reproduced"), cell("2.4.1", "2.6.6", "flaky")])
    per_torch, _ = axis_ranges(grid)
    assert per_torch[0].hits == ()
