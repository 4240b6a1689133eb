"""The page's heatmap columns: grouped by torch release, a column per lightning release
beneath; one per torch release for an entry that imports no lightning."""

from __future__ import annotations

from harness.aggregate import CellValue, EnvInfo
from harness.report.render.columns import env_columns, join_cells, public_version

ENVS = (
    EnvInfo("py3.9-torch2.4.1-lightning2.0.9", "3.9", "2.4.1+cu121", "2.0.9.post0"),
    EnvInfo("py3.11-torch2.4.1-lightning2.0.9", "3.11", "2.4.1+cu121", "2.0.9.post0"),
    EnvInfo("py3.11-torch2.4.1-lightning2.6.6", "3.11", "2.4.1+cu121", "2.6.6"),
    EnvInfo("py3.11-torch2.5.1-lightning2.5.5", "3.11", "2.5.1+cu124", "2.5.5"),
    EnvInfo("py3.11-torch2.5.1-lightning2.5.6", "3.11", "2.5.1+cu124", "2.5.6"),
)


def test_grouped_by_torch_with_a_column_per_lightning_release():
    groups = env_columns(ENVS, torch_only=False)
    assert [g.torch for g in groups] == ["2.4.1", "2.5.1"]
    first, second = groups
    # two pythons of one torch x lightning pair: one column, both environments in it
    assert [(c.lightning, c.label, c.envs) for c in first.columns] == [
        ("2.0.9.post0", "2.0", (0, 1)),
        ("2.6.6", "2.6", (2,)),
    ]
    assert first.columns[0].env_text() == "0 1"
    assert first.columns[0].title == (
        "torch 2.4.1 + lightning 2.0.9.post0: py3.9-torch2.4.1-lightning2.0.9, "
        "py3.11-torch2.4.1-lightning2.0.9"
    )
    # two releases of one lightning minor beside one torch: each labelled by its release
    assert [c.label for c in second.columns] == ["2.5.5", "2.5.6"]


def test_torch_only_a_column_per_torch_release():
    groups = env_columns(ENVS, torch_only=True)
    assert [[(c.label, c.lightning, c.envs) for c in g.columns] for g in groups] == [
        [("2.4.1", "", (0, 1, 2))],
        [("2.5.1", "", (3, 4))],
    ]
    title = groups[0].columns[0].title
    assert title.startswith("torch 2.4.1, measured beside lightning 2.0.9.post0, 2.6.6 (the")
    assert "any lightning gives this answer" in title and ENVS[2].id in title


def test_join_cells_keeps_every_trial():
    ok = CellValue("ok", (("ok", 3),))
    assert join_cells([ok]) is ok
    assert join_cells([ok, ok]) == CellValue("ok", (("ok", 6),))
    mixed = join_cells([ok, CellValue("reproduced", (("reproduced", 2),))])
    assert mixed.status == "flaky" and dict(mixed.counts) == {"ok": 3, "reproduced": 2}
    # runs never counted beside counted ones do not make a cell flaky
    skipped = CellValue("skipped", (("skipped", 1),))
    assert join_cells([ok, skipped]).status == "ok"


def test_public_version():
    assert public_version("2.4.1+cu121") == "2.4.1" and public_version("2.6.6") == "2.6.6"
