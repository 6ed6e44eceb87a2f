"""Repeats as evidence: did a flaky case's pass rate drop, or is the difference noise? Pure.

A case pinned right in some repeats but not all is judged on its rate with Fisher's exact
test, one-sided: the chance, if nothing changed, of a run at most as good as this one.
scipy has the test but is no dependency of this package; the hypergeometric tail is a few
exact integer sums (``math.comb``), checked against scipy in the tests.
"""
from __future__ import annotations

from math import comb

# Past this many repeats a suggestion is not worth making: a case that flaky is better split or fixed.
_MOST_REPEATS = 50


def drop_p_value(pinned: tuple[int, int], now: tuple[int, int]) -> float:
    """One-sided Fisher's exact test of "the rate fell": P(this run has at most ``now[0]`` right | the margins).

    ``pinned`` and ``now`` are (right, repeats). Under no change, the right answers of both
    samples are spread over their repeats at random: the count falling in this run's is hypergeometric.
    """
    right = pinned[0] + now[0]
    total = pinned[1] + now[1]
    drawn = now[1]
    ways = comb(total, drawn)
    tail = sum(comb(right, k) * comb(total - right, drawn - k) for k in range(0, now[0] + 1))
    return tail / ways


def detectable(pinned: tuple[int, int], repeats: int, alpha: float) -> bool:
    """Whether any run of ``repeats`` could show a drop from ``pinned``: even none right must reach ``alpha``."""
    return drop_p_value(pinned, (0, repeats)) <= alpha


def repeats_to_tell(pinned: tuple[int, int], alpha: float) -> int | None:
    """The fewest repeats of a run at which, against this pin as it stands, a fall to nothing right is shown at
    ``alpha``."""
    return next((n for n in range(1, _MOST_REPEATS + 1) if detectable(pinned, n, alpha)), None)


def repeats_to_repin(rate: float, alpha: float) -> int | None:
    """The fewest repeats, pinned and run alike, at which a fall from ``rate`` to nothing right is shown: for a pin
    with too few repeats for any run to tell."""
    for repeats in range(2, _MOST_REPEATS + 1):
        right = round(rate * repeats)
        if 0 < right and detectable((right, repeats), repeats, alpha):
            return repeats
    return None


def flaky_judgement(pinned: tuple[int, int], now: tuple[int, int], alpha: float) -> tuple[bool, str]:
    """Whether a flaky pin's case dropped (a regression), and the reason either way."""
    said = f"flaky: {now[0]}/{now[1]} vs pinned {pinned[0]}/{pinned[1]}"
    p = drop_p_value(pinned, now)
    if p <= alpha:
        return True, f"{said}: its pass rate dropped (Fisher's exact test p = {p:.3g} <= flip_alpha {alpha:g})"
    said += f", within noise (p = {p:.3g} > flip_alpha {alpha:g})"
    if detectable(pinned, now[1], alpha):
        return False, said
    return False, f"{said}; cannot tell at {now[1]} repeats; {_advice(pinned, alpha)}"


def _advice(pinned: tuple[int, int], alpha: float) -> str:
    """How many repeats would tell: of the run against this pin, else of a new pin and the runs after it."""
    needed = repeats_to_tell(pinned, alpha)
    if needed is not None:
        return f"use --repeats {needed} or more"
    both = repeats_to_repin(pinned[0] / pinned[1], alpha)
    if both is not None:
        return f"re-pin with --repeats {both} and run with as many: no run can tell against this pin"
    return "the case is too flaky to judge by repeats"
