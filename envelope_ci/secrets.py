"""Secret values (the endpoint key, extra header values, the GitHub token): never in any output.

One place masks them, in text and in plain data, so the transport, the reports and the
action all hide the same values the same way.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape as xml_escape

# Shorter values would mask ordinary words (a dummy key "x" for a local server).
MIN_SECRET_CHARS = 4


class Secrets:
    """The values that must never be printed, written or posted."""

    def __init__(self, values: Sequence[str | None]) -> None:
        kept = {v for v in values if v and len(v.strip()) >= MIN_SECRET_CHARS}
        self.values = sorted(kept, key=len, reverse=True)
        forms = (lambda v: v, lambda v: json.dumps(v, ensure_ascii=False)[1:-1], xml_escape)
        self._forms = sorted({form(v) for v in self.values for form in forms}, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.values)

    def mask(self, text: str) -> str:
        """``text`` with every secret, also JSON- or XML-escaped, replaced by ``***``."""
        for form in self._forms:
            text = text.replace(form, "***")
        return text

    def scrub(self, value: Any) -> Any:
        """Plain data (a body, headers, a report) with every string masked."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask(k) if isinstance(k, str) else k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value
