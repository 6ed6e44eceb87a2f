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


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str | None) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL, the port filled in from the scheme; None when it has none.

    Hosts are compared as written (lower-cased), never resolved: ``localhost`` and ``127.0.0.1``
    are two hosts, and so are two ports of one host, or http and https.
    """
    parts = _split(url or "")
    if parts is None:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is not a number
        return None
    return (scheme, host, port) if scheme and host and port else None


def shown_host(url: str, base_url: str | None = None) -> str:
    """The host of a URL as a refusal names it: ``host`` or ``host:port``, with the scheme if only that differs."""
    here = origin(url)
    if here is None:
        return repr(redact(url))
    text = _host_text(here)
    base = origin(base_url)
    return f"{here[0]}://{text}" if base is not None and base[0] != here[0] and _host_text(base) == text else text


def _host_text(where: tuple[str, str, int]) -> str:
    scheme, host, port = where
    return host if port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
