"""Envelope -> one of six labels. Pure: no network, files or clock.

The order is the method's: drop, empty, truncated, schema, wrong, right. Transport
failures are named before any semantic grade is attempted, so a torn envelope is
never filed as a wrong answer.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .model import Case, Envelope, Grade, Label
from .schemas import SchemaCheck

# Statuses a client should treat as the path failing, not the request being bad.
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# A Markdown code fence opening a line: the answer was dressed up, not given as JSON.
_FENCE = re.compile(r"^[ \t]*```", re.M)
# What may be left of a literal or a number when the text is cut inside it ("tr", "-", "1.", "2e+").
_CUT_TOKEN = re.compile(r"(?:t|tr|tru|f|fa|fal|fals|n|nu|nul|-|\.\d*|[eE][-+]?)")
_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Reply:
    """The parts of a chat-completion body the grader cares about."""

    content: str | None
    tool_calls: tuple[Mapping[str, Any], ...]
    refusal: str | None
    finish_reason: str | None
    model_id: str | None
    completion_tokens: int | None


def error_message(body: Any, limit: int = 300) -> str | None:
    """The server's own words from any of the error shapes servers send."""
    if isinstance(body, dict):
        err = body.get("error", body if body.get("object") == "error" else None)
        if isinstance(err, str):
            return err[:limit]
        if isinstance(err, dict):
            parts = [str(err[k]) for k in ("message", "type", "code") if err.get(k) not in (None, "")]
            return " | ".join(parts)[:limit] if parts else json.dumps(err)[:limit]
        return None
    if isinstance(body, str) and body.strip():
        text = " ".join(_TAGS.sub(" ", body).split())
        return text[:limit] or None
    return None


def read_reply(body: Mapping[str, Any]) -> Reply | None:
    """Pull the first choice out of a completion body; None when there is no choice."""
    choices = body.get("choices")
    model = body.get("model")
    model_id = model if isinstance(model, str) and model else None
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    message = choice.get("message") or choice.get("delta") or {}
    if not isinstance(message, dict):
        message = {}
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        content = json.dumps(content)
    calls = message.get("tool_calls") or []
    if not calls and isinstance(message.get("function_call"), dict):
        calls = [{"type": "function", "function": message["function_call"]}]
    refusal = message.get("refusal")
    finish = choice.get("finish_reason")
    return Reply(
        content=content,
        tool_calls=tuple(c for c in calls if isinstance(c, dict)),
        refusal=refusal if isinstance(refusal, str) and refusal else None,
        finish_reason=finish if isinstance(finish, str) else None,
        model_id=model_id,
        completion_tokens=tokens,
    )


def spoken_text(reply: Reply) -> str:
    """What the model said, as one string: content, else tool calls, else refusal."""
    if reply.content:
        return reply.content
    if reply.tool_calls:
        return "\n".join(_tool_call_text(call) for call in reply.tool_calls)
    return reply.refusal or ""


def _tool_call_text(call: Mapping[str, Any]) -> str:
    found = call.get("function")
    fn: Mapping[str, Any] = found if isinstance(found, dict) else {}
    return f"{fn.get('name', '?')}({fn.get('arguments', '')})"


def json_payload(reply: Reply) -> str:
    """The text that must parse as JSON: content, or the arguments of a lone tool call."""
    if reply.content and reply.content.strip():
        return reply.content
    if len(reply.tool_calls) == 1:
        fn = reply.tool_calls[0].get("function")
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            return fn["arguments"]
    return spoken_text(reply)


def cut_mid_value(text: str) -> bool:
    """True when text starts as JSON and the parser runs off its end: cut, not malformed."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return False
    try:
        json.loads(stripped)
    except json.JSONDecodeError as exc:
        # Cut: the parser wanted more at the very end, or inside a string, literal or number
        # running to the end; a stray "}" or "]" (a trailing comma) is malformed, not cut.
        return exc.pos >= len(stripped) or "Unterminated string" in exc.msg or bool(_CUT_TOKEN.fullmatch(stripped[exc.pos:]))
    return False


def subset_mismatch(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Where ``actual`` fails to contain ``expected`` (dicts by key, lists by position)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {type(actual).__name__}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing"
            found = subset_mismatch(value, actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            return f"{path}: expected a list of at least {len(expected)} items"
        for i, value in enumerate(expected):
            found = subset_mismatch(value, actual[i], f"{path}[{i}]")
            if found:
                return found
        return None
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        return f"{path}: expected {json.dumps(expected)}, got {json.dumps(actual)[:80]}"
    return None


def expectation_failures(case: Case, text: str, parsed: Any, have_json: bool) -> list[str]:
    """Every expectation of the case that the answer does not meet."""
    failures: list[str] = []
    if case.expect_fragment is not None and case.expect_fragment not in text:
        failures.append(f"missing fragment {case.expect_fragment!r}")
    lowered = text.lower()
    failures += [f"missing {n!r}" for n in case.must_include if n.lower() not in lowered]
    failures += [f"contains forbidden {n!r}" for n in case.must_not_include if n.lower() in lowered]
    if case.has_expect_json and have_json:
        where = subset_mismatch(case.expect_json, parsed)
        if where:
            failures.append(f"expect_json: {where}")
    return failures


def classify(envelope: Envelope, case: Case, check_schema: SchemaCheck | None = None) -> Grade:
    """Label one envelope for one case. ``check_schema`` returns schema errors (compiled once)."""
    label, reasons, reply = _label(envelope, case, check_schema)
    text = envelope.completion if envelope.completion is not None else (spoken_text(reply) if reply else None)
    chars = len(text) if text is not None and not label.is_transport else None
    tokens = reply.completion_tokens if reply and not label.is_transport else None
    estimated = chars is not None and tokens is None
    if estimated:
        tokens = max(1, round(chars / 4)) if chars else 0
    return Grade(
        label=label,
        reasons=(*reasons, *envelope.notes),
        text=text,
        finish_reason=reply.finish_reason if reply else None,
        model_id=reply.model_id if reply else None,
        http_status=envelope.http_status,
        chars=chars,
        tokens=tokens,
        tokens_estimated=estimated,
        elapsed_ms=envelope.elapsed_ms,
        ttft_ms=envelope.ttft_ms,
        attempts=envelope.attempts,
    )


def _label(envelope: Envelope, case: Case, check_schema: SchemaCheck | None) -> tuple[Label, list[str], Reply | None]:
    if envelope.completion is not None:
        reply = Reply(envelope.completion, (), None, None, None, None)
        return _grade_reply(reply, case, check_schema)
    if envelope.error is not None or envelope.http_status is None:
        return Label.DROP, [f"no response: {envelope.error or 'unknown transport error'}"], None
    status = envelope.http_status
    body = envelope.body
    if status != 200:
        message = error_message(body)
        # A 429 whose quota is gone is not transient: waiting will not help (openai-envelopes.md §4).
        quota = status == 429 and "insufficient_quota" in (message or "")
        why = "transient" if (status in TRANSIENT_STATUSES or status >= 500) and not quota else "request rejected"
        return Label.DROP, [f"HTTP {status} ({why})" + (f": {message}" if message else "")], None
    if not isinstance(body, dict):
        snippet = error_message(body) or "empty body"
        return Label.EMPTY, [f"HTTP 200 but the body is not a JSON object: {snippet[:120]}"], None
    if body.get("error") or body.get("object") == "error":
        return Label.DROP, [f"HTTP 200 carrying an error: {error_message(body)}"], None
    read = read_reply(body)
    if read is None:
        return Label.EMPTY, ["HTTP 200 with no choices"], None
    reply = read
    if envelope.stream_complete is False and reply.finish_reason is None:
        return Label.TRUNCATED, ["stream ended before a finish_reason"], reply
    return _grade_reply(reply, case, check_schema)


def _grade_reply(reply: Reply, case: Case, check_schema: SchemaCheck | None) -> tuple[Label, list[str], Reply]:
    reasons: list[str] = []
    # Whitespace alone is not an answer: a server that pads an empty completion has said nothing.
    spoke = bool(reply.content and reply.content.strip()) or bool(reply.tool_calls) or reply.refusal is not None
    if reply.finish_reason == "length":
        return Label.TRUNCATED, ["finish_reason is 'length' (hit the token limit)"], reply
    if not spoke and reply.finish_reason != "content_filter":
        shape = "null" if reply.content is None else "empty"
        return Label.EMPTY, [f"content is {shape} and the model said nothing else"], reply
    if reply.finish_reason == "content_filter":
        reasons.append("finish_reason is 'content_filter' (the provider's policy answered)")
    if reply.refusal is not None and not reply.content:
        reasons.append(f"model refused: {reply.refusal[:120]}")
    text = spoken_text(reply)
    speaking_json = bool(reply.content) or bool(reply.tool_calls)
    if speaking_json and cut_mid_value(json_payload(reply)):
        return Label.TRUNCATED, reasons + ["JSON stops mid-value"], reply
    parsed: Any = None
    have_json = False
    if case.wants_json:
        if not speaking_json:
            return Label.WRONG, reasons + ["no JSON answer to grade"], reply
        payload = json_payload(reply)
        try:
            parsed = json.loads(payload)
            have_json = True
        except json.JSONDecodeError as exc:
            hint = " (wrapped in a Markdown code fence)" if _FENCE.search(payload) else ""
            return Label.SCHEMA, reasons + [f"answer is not JSON{hint}: {exc.msg} at char {exc.pos}"], reply
        if check_schema is not None:
            errors = check_schema(parsed)
            if errors:
                return Label.SCHEMA, reasons + [f"schema: {e}" for e in errors[:3]], reply
    failures = expectation_failures(case, text, parsed, have_json)
    if failures:
        return Label.WRONG, reasons + failures, reply
    return Label.RIGHT, reasons, reply
