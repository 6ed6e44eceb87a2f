"""Envelope -> drop, empty or truncated, before any answer is judged. Pure.

The order is the method's: drop, empty, truncated; only an envelope that is none of these
reaches the answer assertions, so a torn envelope is never filed as a wrong answer. The
live client asks the same question to decide whether to retry.
"""
from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from ..model import Data, Envelope, Label
from ..providers.base import Provider, Reply, Stop
from ..providers.registry import provider_named
from ..sources.parse import too_deep
from ..urls import redact

# Statuses a client should treat as the path failing, not the request being bad.
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# The most of a redirect's Location a reason shows.
REDIRECT_SHOWN = 120
# Why a stream that ended before any finish_reason is a drop (the live client counts these).
STREAM_CUT = "stream cut: it ended before a finish_reason (the server closed it mid-answer)"
# One token cut short by the end of the text, from where the parser complains about it: a literal
# ("tr"), a number's sign, fraction or exponent ("-", "1.", "2e+"), a string with no closing quote
# (reported from its opening quote), or a \u escape (reported from its "u": "caf\u00").
_CUT_TOKEN = re.compile(r'(?:t|tr|tru|f|fa|fal|fals|n|nu|nul|-|\.\d*|[eE][-+]?|'
                        r'"(?:[^"\\]|\\.)*\\?|u[0-9a-fA-F]{0,4})', re.DOTALL)


class EnvelopeClass(Data, frozen=True):
    """What the envelope alone says: a transport or truncation label, or None (grade the answer)."""

    label: Label | None
    reasons: tuple[str, ...]
    reply: Reply | None
    # the JSON payload, when telling a cut from a whole answer parsed it (a 1-tuple: it may be null)
    parsed: tuple[Any, ...] = ()


def spoken_text(reply: Reply) -> str:
    """What the model said, as one string: content, else tool calls, else refusal."""
    if reply.content:
        return reply.content
    if reply.tool_calls:
        return "\n".join(_tool_call_text(call) for call in reply.tool_calls)
    return reply.refusal or ""


def _tool_call_text(call: object) -> str:
    found = call.get("function") if isinstance(call, dict) else None
    fn = found if isinstance(found, dict) else {}
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


def speaks_json(reply: Reply) -> bool:
    """Content or a tool call: something that could be JSON (a refusal is not)."""
    return bool(reply.content) or bool(reply.tool_calls)


def cut_mid_value(text: str) -> bool:
    """True when text starts as JSON and the parser runs off its end: cut, not malformed."""
    return _read_json(text)[0]


class AnswerTooDeep(ValueError):
    """An answer nested deeper than MAX_ANSWER_DEPTH: the model's doing, graded (``schema`` where JSON was asked),
    never a crash."""


# Deeper answers are not read as JSON: parsers recurse, and a hostile answer must not end the run.
MAX_ANSWER_DEPTH = 1000


def loads_answer(text: str) -> Any:
    """An answer's JSON as ``json.loads`` reads it (NaN and lone surrogates too); msgspec reads the commonest,
    strict JSON, faster.

    AnswerTooDeep for an answer nested deeper than MAX_ANSWER_DEPTH, whatever else is wrong with it.
    """
    if too_deep(text, MAX_ANSWER_DEPTH) is not None:
        raise AnswerTooDeep(_TOO_DEEP)
    try:
        return msgspec.json.decode(text)
    except msgspec.MsgspecError:
        pass
    except RecursionError:  # nearly as deep, in a deeper call stack: the parser's own limit
        raise AnswerTooDeep(_TOO_DEEP) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise AnswerTooDeep(_TOO_DEEP) from None


_TOO_DEEP = f"the answer nests too deep to read as JSON (at most {MAX_ANSWER_DEPTH} levels)"


def _read_json(text: str) -> tuple[bool, tuple[Any, ...]]:
    """Whether text is JSON cut mid-value, and ``(value,)`` when it parses as it is (grading then need not parse it
    again)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return False, ()
    try:
        # JSON's own whitespace only: text.strip() takes more (\x0c), and grading parses text
        return False, (loads_answer(text),)
    except json.JSONDecodeError:
        pass
    except AnswerTooDeep:  # whole or cut, grading says what it is
        return False, ()
    try:
        json.loads(stripped)
    except json.JSONDecodeError as exc:
        # Cut whatever the complaint, when its position is the end of the text: the parser wanted
        # more there, or the token it choked on runs to the end. A stray "}" (a trailing comma)
        # or a bad escape followed by more text is malformed, not cut.
        return exc.pos >= len(stripped) or bool(_CUT_TOKEN.fullmatch(stripped, exc.pos)), ()
    return False, ()


def classify(envelope: Envelope) -> EnvelopeClass:
    """The envelope's own label (drop, empty, truncated), or None with the reply to grade."""
    if envelope.completion is not None:
        return _classify_reply(Reply(envelope.completion, (), None, None, None, None), None)
    if envelope.error is not None or envelope.http_status is None:
        return EnvelopeClass(Label.DROP, (f"no response: {envelope.error or 'unknown transport error'}",), None)
    status = envelope.http_status
    body = envelope.body
    provider = provider_named(envelope.provider, "an envelope's provider")  # the wire format that made it
    error_message = provider.error_message
    if 300 <= status < 400:
        location = next((str(v) for k, v in envelope.headers.items() if k.lower() == "location"), None)
        return EnvelopeClass(Label.DROP, (redirect_reason(status, location),), None)
    if status != 200:
        message = error_message(body)
        # A 429 whose quota is gone is not transient: waiting will not help.
        quota = status == 429 and "insufficient_quota" in (message or "")
        why = "transient" if (status in TRANSIENT_STATUSES or status >= 500) and not quota else "request rejected"
        return EnvelopeClass(Label.DROP, (f"HTTP {status} ({why})" + (f": {message}" if message else ""),), None)
    if not isinstance(body, dict):
        snippet = error_message(body) or "empty body"
        return EnvelopeClass(Label.EMPTY, (f"HTTP 200 but the body is not a JSON object: {snippet[:120]}",), None)
    failed = provider.failure(body)
    if failed is not None:
        return EnvelopeClass(Label.DROP, (f"HTTP 200 carrying an error: {failed}",), None)
    reply = provider.read_reply(body)
    if reply is None:
        return EnvelopeClass(Label.EMPTY, ("HTTP 200 with no choices",), None)
    if envelope.stream_complete is False:
        # The server cut the stream, not the model its answer: llama-cpp-python ends a stream with a
        # bare [DONE] when the next request arrives, proxies close it at their timeout. Retry it.
        return EnvelopeClass(Label.DROP, (STREAM_CUT,), reply)
    return _classify_reply(reply, provider)


def redirect_reason(status: int, location: str | None) -> str:
    """A redirect, never followed: the key and the prompt stay with the configured endpoint.

    ``location`` shown escaped and cut.
    """
    if not location:
        return f"HTTP {status} redirect with no Location, not followed"
    where = redact(location)
    shown = ascii(where[:REDIRECT_SHOWN]) + ("…" if len(where) > REDIRECT_SHOWN else "")
    return f"HTTP {status} redirect to {shown}, not followed: point --base-url at where the endpoint really is"


def _classify_reply(reply: Reply, provider: Provider | None) -> EnvelopeClass:
    """``provider`` says what the reply's stop word means (None: a bare completion, which has none)."""
    # Whitespace alone is not an answer: a server that pads an empty completion has said nothing.
    spoke = bool(reply.content and reply.content.strip()) or bool(reply.tool_calls) or reply.refusal is not None
    stop = provider.stop(reply.finish_reason) if provider is not None else Stop.UNKNOWN
    said = f"{provider.stop_field} is '{reply.finish_reason}'" if provider is not None else ""
    if stop is Stop.LENGTH:
        return EnvelopeClass(Label.TRUNCATED, (f"{said} (cut before its end)",), reply)
    if not spoke and stop is not Stop.FILTERED:
        shape = "null" if reply.content is None else "empty"
        return EnvelopeClass(Label.EMPTY, (f"content is {shape} and the model said nothing else",), reply)
    notes: list[str] = []
    if stop is Stop.FILTERED:
        notes.append(f"{said} (the provider's policy answered)")
    if reply.refusal is not None and not reply.content:
        notes.append(f"model refused: {reply.refusal[:120]}")
    cut, parsed = _read_json(json_payload(reply)) if speaks_json(reply) else (False, ())
    if cut:
        return EnvelopeClass(Label.TRUNCATED, (*notes, "JSON stops mid-value"), reply)
    return EnvelopeClass(None, tuple(notes), reply, parsed)


def stream_was_cut(envelope: Envelope) -> bool:
    """Whether the server cut this stream before its end (a drop the run counts: see ``STREAM_CUT``)."""
    return envelope.stream_complete is False and STREAM_CUT in classify(envelope).reasons


def transport_label(envelope: Envelope) -> Label | None:
    """Drop or empty (worth a retry), else None: what the live client asks of each attempt."""
    label = classify(envelope).label
    return label if label is not None and label.is_transport else None
