"""Rates of k successes in n runs, with their Wilson 95% intervals, and how they read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Z95", "Rate", "pct", "wilson"]

Z95 = 1.959963984540054  # two-sided 95% normal quantile


# -- rates ---------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of k successes in n trials; None when n == 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must lie in [0, n={n}]")
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # clamp rounding noise so that 0/n and n/n include 0 and 1 exactly
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Rate:
    k: int
    n: int
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        interval = wilson(k, n)
        if interval is None:
            return cls(k, n)
        return cls(k, n, interval[0], interval[1])

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def contains(self, rate: float) -> bool:
        if self.low is None or self.high is None:
            return False
        return self.low - 1e-12 <= rate <= self.high + 1e-12

    def text(self) -> str:
        """'7/8 = 87.5% (CI 52.9–97.8%)' (Wilson 95%) or '0/0 (no applicable runs)'."""
        if not self.n:
            return "0/0 (no applicable runs)"
        return f"{self.k}/{self.n} = {pct(self.value)} (CI {pct(self.low)[:-1]}–{pct(self.high)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "n": self.n,
            "rate": _round(self.value),
            "low": _round(self.low),
            "high": _round(self.high),
        }


def pct(x: float | None) -> str:
    if x is None:
        return "–"
    s = f"{100 * x:.1f}"
    return (s[:-2] if s.endswith(".0") else s) + "%"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)
