"""Records -> aggregates -> verdicts. Each rule has one home:

  harness/aggregate/stats.py            rates, Wilson intervals, percentages
  harness/domain.py           devices, precisions, kinds, statuses, environment id format
  aggregate/model.py          the aggregate types and their JSON form (``to_dict``)
  aggregate/advice.py         version advice: what it changed, what a cell already satisfied
  aggregate/cells.py          records grouped into cells and counted per variant (by the
                              columnar engine, over harness/store/columnar.py's record table)
  aggregate/verdicts.py       claimed vs measured
  aggregate/diff.py           the cells whose outcomes changed between two sets of records
  aggregate/unmeasured.py     the rows of the claims no variant measures (not measured: why)
  docs/reference/outcomes-and-verdicts.md   every counting and verdict rule, in words

This package re-exports what the renderers and the report step use.
"""

from __future__ import annotations

from harness.aggregate.cells import (
    aggregate,
    aggregate_entry,
    aggregate_table,
    machine_labels,
    related_now,
    reread,
)
from harness.aggregate.model import (
    ADVICE,
    CONFIRMED,
    CONSISTENT,
    CONTRADICTED,
    DEPENDS,
    FAILS_OTHERWISE,
    FIGURES,
    FLAKY,
    GRADE_ANSWERS,
    HOLDS,
    INCONCLUSIVE,
    KIND_ORDER,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
    NOT_STATED,
    OUTCOME_ORDER,
    OVERSTATED,
    VERDICTS,
    WRONG,
    Aggregates,
    CellValue,
    EntryAggregate,
    EnvInfo,
    Failure,
    Machine,
    MessageSeen,
    NotCounted,
    ReproRange,
    Texts,
    Trials,
    VariantAggregate,
    Verdict,
    cell_value,
    cell_value_of,
    env_info,
    slice_id,
)
from harness.aggregate.stats import Rate, pct, wilson
from harness.aggregate.verdicts import (
    MARGIN,
    RateReading,
    documented_failure_text,
    failed_silently_as_documented,
    read_rate,
)

__all__ = [
    "ADVICE",
    "CONFIRMED",
    "CONTRADICTED",
    "FAILS_OTHERWISE",
    "NOT_AS_DOCUMENTED",
    "FIGURES",
    "FLAKY",
    "GRADE_ANSWERS",
    "HOLDS",
    "INCONCLUSIVE",
    "KIND_ORDER",
    "MARGIN",
    "NOT_MEASURABLE",
    "NOT_STATED",
    "OUTCOME_ORDER",
    "OVERSTATED",
    "CONSISTENT",
    "DEPENDS",
    "VERDICTS",
    "WRONG",
    "Aggregates",
    "CellValue",
    "EntryAggregate",
    "EnvInfo",
    "Failure",
    "Machine",
    "MessageSeen",
    "NotCounted",
    "Rate",
    "RateReading",
    "ReproRange",
    "VariantAggregate",
    "Verdict",
    "Texts",
    "Trials",
    "aggregate",
    "aggregate_entry",
    "aggregate_table",
    "cell_value",
    "cell_value_of",
    "documented_failure_text",
    "env_info",
    "failed_silently_as_documented",
    "machine_labels",
    "pct",
    "read_rate",
    "related_now",
    "reread",
    "slice_id",
    "wilson",
]
