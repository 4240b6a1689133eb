"""Argument types that check a value's range as argparse reads it (exit 2, named)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from harness.config import out_of_range

__all__ = ["builds_count", "machine_name", "ranged"]


def ranged(name: str, kind: type[int] | type[float]) -> Callable[[str], float]:
    """An argparse type: the text as ``kind`` inside RANGES[name], or exit 2 saying so."""

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}"
            ) from None
        problem = out_of_range(name, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    convert.__name__ = kind.__name__  # argparse names the type in its messages
    return convert


def machine_name(text: str) -> str:
    if not 1 <= len(text) <= 100:
        raise argparse.ArgumentTypeError(f"must be 1 to 100 characters, got {len(text)}")
    return text


def builds_count(text: str) -> int:
    """--max-builds: a whole number, 0 or more (0: build nothing, read what is stored)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value
