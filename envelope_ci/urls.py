"""Endpoint URLs: checked once at start, shown without their passwords, their passwords kept secret.

A base URL or a proxy URL may carry ``user:password@``; that userinfo is a secret like the
API key, so it is masked everywhere and never shown even in an error about the URL itself.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import SplitResult, urlsplit

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _split(url: str) -> SplitResult | None:
    try:
        return urlsplit(url)
    except ValueError:
        return None


def redact(url: str) -> str:
    """The URL with any ``user:password@`` shown as ``***@``."""
    parts = _split(url)
    if parts is None or "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


def userinfo_secrets(url: str | None) -> list[str]:
    """The password and the whole ``user:password`` of a URL, to be masked wherever they appear."""
    parts = _split(url or "")
    if parts is None or "@" not in parts.netloc:
        return []
    userinfo = parts.netloc.rpartition("@")[0]
    return [userinfo, userinfo.partition(":")[2]]


def endpoint_secrets(base_url: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every URL secret a live run could echo: the base URL's userinfo and the proxies'."""
    env = os.environ if environ is None else environ
    found = userinfo_secrets(base_url)
    for name in PROXY_VARIABLES:
        found += userinfo_secrets(env.get(name))
    return found


def url_problem(url: str) -> str | None:
    """Why a base URL cannot be used (scheme, host, port), or None; checked before any request."""
    parts = _split(url)
    if parts is None:
        return f"{redact(url)!r} is not a URL"
    if parts.scheme not in ("http", "https"):
        return (f"{redact(url)!r} needs http:// or https:// "
                f"(got {parts.scheme + '://' if parts.scheme else 'no scheme'})")
    try:
        port = parts.port
    except ValueError:
        return f"{redact(url)!r} has a port that is not a number from 1 to 65535"
    if not parts.hostname:
        return f"{redact(url)!r} names no host"
    if port == 0:
        return f"{redact(url)!r} has port 0"
    return None
