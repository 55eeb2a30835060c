"""What a counter step answers, whichever backend took it (gateway/state/backend.py): the window
of each counter, and whether the hit was counted."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    key: str
    ceiling: int
    count: int  # hits in the window, this one included when allowed
    reset_at: float  # Unix time the window ends

    @property
    def remaining(self) -> int:
        return max(self.ceiling - self.count, 0)


@dataclass(frozen=True)
class HitResult:
    allowed: bool
    windows: tuple[Window, ...]  # all counters when allowed; only the refusing one otherwise
    stale: bool = False  # a guard differed: nothing was counted
    versions: tuple[int, ...] = ()  # the guards' current values (when allowed or stale)
    amounts: tuple[int | None, ...] = ()  # the read keys' totals (when allowed); None: missing
    beside: tuple[int, ...] = ()  # the values read beside the step, in the same round trip (0: missing)

    @property
    def refused_by(self) -> Window | None:
        return None if self.allowed or self.stale else self.windows[0]
