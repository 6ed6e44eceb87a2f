"""Fixtures against the pins: which cases and files changed since the pins were written."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..findings import Alert, FixtureChanges
from ..model import Case, Pins


def fixture_changes(cases: Iterable[Case], pins: Pins | None, current_hash: str,
                    files: Mapping[str, str] | None = None) -> FixtureChanges:
    """Which cases (and files) the fixtures added, removed or modified since the pins were written."""
    if pins is None:
        return FixtureChanges(current_hash, None, False, (), (), (), ())
    files = files or {}
    files_changed = (sorted(p for p in set(files) | set(pins.files) if files.get(p) != pins.files.get(p))
                     if pins.files else [])
    now = {c.id: c.digest for c in cases}
    added = tuple(sorted(set(now) - set(pins.cases)))
    removed = tuple(sorted(set(pins.cases) - set(now)))
    modified = tuple(sorted(cid for cid in now if cid in pins.cases and pins.cases[cid].hash != now[cid]))
    return FixtureChanges(
        hash=current_hash,
        pinned_hash=pins.fixtures_hash,
        # Every digest counts, not only the top hash: a pasted hash does not hide a changed case.
        changed=current_hash != pins.fixtures_hash or bool(added or removed or modified or files_changed),
        added=added,
        removed=removed,
        modified=modified,
        files_changed=tuple(files_changed),
    )


def fixtures_alert(changes: FixtureChanges) -> Alert | None:
    """``fixtures_changed`` when the fixtures differ from the pinned hash, naming what changed."""
    if not changes.changed:
        return None
    lists = {"added": changes.added, "removed": changes.removed, "modified": changes.modified}
    parts = [f"{k}: {', '.join(ids[:10])}" for k, ids in lists.items() if ids]
    if changes.files_changed:
        parts.append(f"files: {', '.join(changes.files_changed[:10])}")
    if not any(lists.values()):
        parts.append("no case changed: a comment, formatting, or a non-case file such as envelope-ci.yaml")
    return Alert("fixtures_changed", None,
                 f"fixtures differ from the pinned hash ({'; '.join(parts)}); rewrite the pins on an adjudication run "
                 "and commit them in this PR")
