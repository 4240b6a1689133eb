"""harness/gcpause.py: the collector held off within a pause (the outermost decides), and
what was made meanwhile left to the oldest generation, not walked at once."""

from __future__ import annotations

import gc

import pytest

from harness.gcpause import gc_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_within_a_pause_and_the_outermost_turns_it_on(collector_on):
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause leaves it to the outer
    assert gc.isenabled()


def test_what_a_pause_made_joins_the_oldest_generation_not_the_youngest(collector_on):
    gc.collect()
    with gc_paused():
        made = [[] for _ in range(200_000)]
        assert gc.get_count()[0] >= 200_000  # a collection now would walk every one
    oldest = {id(x) for x in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in (made, made[0], made[-1]))
    assert gc.get_freeze_count() == 0  # none kept out of the collector for good


def test_a_pause_ends_the_same_when_its_work_raises(collector_on):
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("the work failed")
    assert gc.isenabled()
