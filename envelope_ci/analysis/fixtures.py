"""Fixtures against the pins: which cases and files changed since the pins were written."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..findings import Alert, FixtureChanges
from ..model import Case, Pin, Pins


def fixture_changes(cases: Iterable[Case], pins: Pins | None, current_hash: str,
                    files: Mapping[str, str] | None = None) -> FixtureChanges:
    """Which cases (and files) the fixtures added, removed or modified since the pins were written."""
    if pins is None:
        return FixtureChanges(current_hash, None, False, (), (), (), ())
    files = files or {}
    files_changed = (sorted(p for p in set(files) | set(pins.files) if files.get(p) != pins.files.get(p))
                     if pins.files else [])
    by_id = {c.id: c for c in cases}
    added = tuple(sorted(set(by_id) - set(pins.cases)))
    removed = tuple(sorted(set(pins.cases) - set(by_id)))
    changed = [c for cid, c in by_id.items() if cid in pins.cases and pins.cases[cid].hash != c.digest]
    retimed = tuple(sorted(c.id for c in changed if change_of(pins.cases[c.id], c) == "retimed"))
    modified = tuple(sorted({c.id for c in changed}.difference(retimed)))
    return FixtureChanges(
        hash=current_hash,
        pinned_hash=pins.fixtures_hash,
        # Every digest counts, not only the top hash: a pasted hash does not hide a changed case.
        changed=current_hash != pins.fixtures_hash or bool(added or removed or changed or files_changed),
        added=added,
        removed=removed,
        modified=modified,
        files_changed=tuple(files_changed),
        retimed=retimed,
    )


def change_of(pin: Pin | None, case: Case) -> str | None:
    """What changed in a case since ``pin``: ``added`` (no pin), nothing, ``retimed`` (only its recordings' times or
    usage: the pin's untimed digest still holds) or ``modified``."""
    if pin is None:
        return "added"
    if pin.hash == case.digest:
        return None
    return "retimed" if pin.answer == case.untimed_digest else "modified"


def fixtures_alert(changes: FixtureChanges) -> Alert | None:
    """``fixtures_changed`` when the fixtures differ from the pinned hash, naming what changed."""
    if not changes.changed:
        return None
    lists = {"modified": changes.modified, "added": changes.added, "removed": changes.removed,
             "retimed (only time or usage moved)": changes.retimed}
    parts = [f"{k}: {', '.join(ids[:10])}" for k, ids in lists.items() if ids]
    if changes.files_changed:
        parts.append(f"files: {', '.join(changes.files_changed[:10])}")
    if not any(lists.values()):
        parts.append("no case changed: a comment, formatting, or a non-case file such as envelope-ci.yaml")
    return Alert("fixtures_changed", None,
                 f"fixtures differ from the pinned hash ({'; '.join(parts)}); rewrite the pins on an adjudication run "
                 "and commit them in this PR")
