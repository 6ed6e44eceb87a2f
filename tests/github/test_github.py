"""Tests for envelope_ci.github (client, comment, commands) against the local GitHub API stand-in, over real sockets."""

from __future__ import annotations

import email.utils
import re
import socket
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.github.client import CommentResult, GitHubClient
from envelope_ci.github.commands import (
    SUMMARY_LIMIT,
    add_mask,
    append_summary,
    error_annotation,
    escape_data,
    escape_property,
    warning,
    write_outputs,
)
from envelope_ci.github.comment import fit_comment, key_digest, marker_for
from envelope_ci.github.rest import GitHubError
from envelope_ci.model import Detail
from tests.support.github_stub import (
    APP_LOGIN,
    APP_TOKEN,
    BOT_LOGIN,
    PAT_LOGIN,
    PAT_TOKEN,
    READ_TOKEN,
    REPO_ID,
    WRITE_TOKEN,
    GitHubStub,
)

PR = 7
MARKER = marker_for("default")


@pytest.fixture
def sleeps() -> list[float]:
    return []


def client_for(stub: GitHubStub, sleeps: list[float], token: str = WRITE_TOKEN, **kwargs: Any) -> GitHubClient:
    return GitHubClient(stub.url, stub.repo, token, sleep=sleeps.append, **kwargs)


def calls(stub: GitHubStub) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in stub.requests]


# -- sticky comment ---------------------------------------------------------------------------


def test_create_then_edit_leaves_one_comment(stub: GitHubStub, sleeps: list[float]) -> None:
    client = client_for(stub, sleeps)
    first = client.upsert_comment(PR, "## envelope-ci\nrun 1", MARKER)
    assert first.created is True
    assert first.url == f"https://github.com/{stub.repo}/pull/{PR}#issuecomment-{first.id}"

    second = client.upsert_comment(PR, "## envelope-ci\nrun 2", MARKER)
    assert second == CommentResult(id=first.id, url=first.url, created=False)

    comments = stub.comments(PR)
    assert len(comments) == 1
    assert comments[0]["body"] == "<!-- envelope-ci:default -->\n## envelope-ci\nrun 2"
    listing = f"/repos/{stub.repo}/issues/{PR}/comments"
    assert calls(stub) == [
        ("GET", listing),
        ("POST", listing),
        ("GET", listing),
        ("PATCH", f"/repos/{stub.repo}/issues/comments/{first.id}"),
    ]
    assert sleeps == []


def test_requests_carry_the_documented_headers(stub: GitHubStub, sleeps: list[float]) -> None:
    client_for(stub, sleeps).upsert_comment(PR, "body", MARKER)
    first = stub.requests[0]
    assert first.headers["Authorization"] == "Bearer <redacted>"  # the stub accepted the real token
    assert first.headers["Accept"] == "application/vnd.github+json"
    assert first.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert first.headers["User-Agent"].startswith("envelope-ci")
    assert first.query == {"per_page": ["100"]}
    assert stub.requests[1].body == {"body": f"{MARKER}\nbody"}


def test_marker_already_first_is_not_repeated(stub: GitHubStub, sleeps: list[float]) -> None:
    client_for(stub, sleeps).upsert_comment(PR, f"{MARKER}\nbody", MARKER)
    assert stub.comments(PR)[0]["body"] == f"{MARKER}\nbody"


def test_own_comment_found_on_page_two(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.seed_many(PR, 150)
    ours = stub.seed_comment(PR, f"{MARKER}\nold report", login=BOT_LOGIN, user_type="Bot")
    client = client_for(stub, sleeps)

    assert len(list(client.list_comments(PR))) == 151
    result = client.upsert_comment(PR, "new report", MARKER)

    assert result.id == ours["id"] and result.created is False
    assert len(stub.comments(PR)) == 151
    page_two = [r for r in stub.requests if r.method == "GET" and r.query.get("page") == ["2"]]
    assert page_two, "the client never asked for page 2"
    # It followed the Link header verbatim (github.com links use the repository-id path).
    assert page_two[0].path == f"/repositories/{REPO_ID}/issues/{PR}/comments"
    assert page_two[0].query == {"per_page": ["100"], "page": ["2"]}


def test_newest_of_several_own_comments_wins(stub: GitHubStub, sleeps: list[float]) -> None:
    older = stub.seed_comment(PR, f"{MARKER}\nolder", login=BOT_LOGIN, user_type="Bot")
    stub.seed_many(PR, 120)
    newer = stub.seed_comment(PR, f"{MARKER}\nnewer", login=BOT_LOGIN, user_type="Bot")
    found = client_for(stub, sleeps).find_own_comment(PR, MARKER, None)
    assert found is not None and found["id"] == newer["id"] != older["id"]


def test_comments_quoting_the_marker_are_never_ours(stub: GitHubStub, sleeps: list[float]) -> None:
    human = stub.seed_comment(PR, f"{MARKER}\nI pasted the bot's comment here", login="octocat")
    impostor = stub.seed_comment(PR, f"{MARKER}\nsame name, not a bot", login="github-actions", user_type="User")
    other_bot = stub.seed_comment(PR, f"{MARKER}\nanother app", login="renovate[bot]", user_type="Bot")
    other_suite = stub.seed_comment(
        PR, f"{marker_for('other')}\n```text\n{MARKER}\n```", login=BOT_LOGIN, user_type="Bot"
    )
    client = client_for(stub, sleeps)
    assert client.find_own_comment(PR, MARKER, None) is None

    result = client.upsert_comment(PR, "report", MARKER)

    assert result.created is True
    after = {c["id"]: c["body"] for c in stub.comments(PR)}
    for seeded in (human, impostor, other_bot, other_suite):
        assert after[seeded["id"]] == seeded["body"]
    assert after[result.id] == f"{MARKER}\nreport"


def test_author_override_accepts_an_apps_bot_login(stub: GitHubStub, sleeps: list[float]) -> None:
    app = stub.seed_comment(PR, f"{MARKER}\nfrom an app", login="envelope-app[bot]", user_type="Bot")
    pat = stub.seed_comment(PR, f"{MARKER}\nfrom a PAT", login="Release-Robot", user_type="User")
    client = client_for(stub, sleeps)
    assert client.find_own_comment(PR, MARKER, "envelope-app")["id"] == app["id"]  # type: ignore[index]
    assert client.find_own_comment(PR, MARKER, "envelope-app[bot]")["id"] == app["id"]  # type: ignore[index]
    assert client.find_own_comment(PR, MARKER, "release-robot")["id"] == pat["id"]  # type: ignore[index]
    assert client.find_own_comment(PR, MARKER, None) is None


def test_viewer_login_names_a_pat_user_an_app_and_the_bot(stub: GitHubStub, sleeps: list[float]) -> None:
    assert client_for(stub, sleeps, token=PAT_TOKEN).viewer_login() == PAT_LOGIN
    # Installation tokens: GET /user is 403 (not an error); GraphQL's viewer names them.
    assert client_for(stub, sleeps).viewer_login() == BOT_LOGIN
    assert client_for(stub, sleeps, token=APP_TOKEN).viewer_login() == APP_LOGIN
    assert client_for(stub, sleeps, token="ghs_unknown").viewer_login() is None  # 401
    assert sleeps == []


def test_pat_upserts_its_own_comment(stub: GitHubStub, sleeps: list[float]) -> None:
    client = client_for(stub, sleeps, token=PAT_TOKEN)
    bot = client_for(stub, sleeps).upsert_comment(PR, "from the bot", MARKER)
    login = client.viewer_login()
    first = client.upsert_comment(PR, "one", MARKER, author=login)
    second = client.upsert_comment(PR, "two", MARKER, author=login)
    assert first.created and not second.created and first.id == second.id != bot.id
    assert [(c["user"]["login"], c["body"]) for c in stub.comments(PR)] == [
        (BOT_LOGIN, f"{MARKER}\nfrom the bot"),
        (PAT_LOGIN, f"{MARKER}\ntwo"),
    ]


def test_two_markers_keep_two_comments(stub: GitHubStub, sleeps: list[float]) -> None:
    client = client_for(stub, sleeps)
    chat, rag = marker_for("evals/chat"), marker_for("evals/rag")
    a1 = client.upsert_comment(PR, "chat 1", chat)
    b1 = client.upsert_comment(PR, "rag 1", rag)
    a2 = client.upsert_comment(PR, "chat 2", chat)
    b2 = client.upsert_comment(PR, "rag 2", rag)
    assert (a1.created, b1.created, a2.created, b2.created) == (True, True, False, False)
    assert (a2.id, b2.id) == (a1.id, b1.id) and a1.id != b1.id
    assert [c["body"] for c in stub.comments(PR)] == [f"{chat}\nchat 2", f"{rag}\nrag 2"]


def test_comment_deleted_between_list_and_edit_is_recreated(
    stub: GitHubStub, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(stub, sleeps)
    monkeypatch.setattr(client, "find_own_comment", lambda *a, **k: {"id": 424242, "body": MARKER})
    result = client.upsert_comment(PR, "report", MARKER)
    assert result.created is True
    assert calls(stub)[0] == ("PATCH", f"/repos/{stub.repo}/issues/comments/424242")


def test_read_only_token_fails_fast_with_403(stub: GitHubStub, sleeps: list[float]) -> None:
    client = client_for(stub, sleeps, token=READ_TOKEN)
    with pytest.raises(GitHubError) as caught:
        client.upsert_comment(PR, "report", MARKER)
    err = caught.value
    assert err.status == 403
    assert "Resource not accessible by integration" in err.message
    assert "issues=write; pull_requests=write" in err.message
    assert sleeps == []
    assert [m for m, _ in calls(stub)] == ["GET", "POST"]  # no retry loop
    assert stub.comments(PR) == []


def test_body_too_long_is_reported_with_githubs_reason(stub: GitHubStub, sleeps: list[float]) -> None:
    with pytest.raises(GitHubError) as caught:
        client_for(stub, sleeps).upsert_comment(PR, "x" * 70_000, MARKER)
    assert caught.value.status == 422
    assert "Validation Failed: Body is too long (maximum is 65536 characters)" in str(caught.value)
    assert sleeps == []


def test_bad_credentials(stub: GitHubStub, sleeps: list[float]) -> None:
    with pytest.raises(GitHubError) as caught:
        list(client_for(stub, sleeps, token="ghp_not_a_known_token").list_comments(PR))
    assert caught.value.status == 401
    assert "Bad credentials" in caught.value.message


# -- rate limits and transient failures --------------------------------------------------------


def test_retry_after_is_waited_then_succeeds(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant_rate_limit(status=429, retry_after=7)
    result = client_for(stub, sleeps).upsert_comment(PR, "report", MARKER)
    assert result.created is True
    assert sleeps == [7.0]
    assert [m for m, _ in calls(stub)] == ["GET", "GET", "POST"]


def test_secondary_limit_403_with_retry_after(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant_rate_limit(status=403, retry_after=3)
    assert list(client_for(stub, sleeps).list_comments(PR)) == []
    assert sleeps == [3.0]


def test_retry_after_as_an_http_date_or_in_milliseconds(stub: GitHubStub, sleeps: list[float]) -> None:
    # The shared parser (envelope_ci.transport.retry_after), read against the client's clock.
    now = 1_700_000_000.0
    stub.plant_rate_limit(status=429, retry_after=email.utils.formatdate(now + 9, usegmt=True))
    stub.plant(429, headers={"retry-after-ms": "1500"}, body={"message": "slow down"})
    assert list(client_for(stub, sleeps, clock=lambda: now).list_comments(PR)) == []
    assert sleeps == [9.0, 1.5]


def test_primary_limit_waits_until_reset(stub: GitHubStub, sleeps: list[float]) -> None:
    now = 1_700_000_000.0
    stub.plant_rate_limit(status=403, reset_at=int(now) + 5)
    client = client_for(stub, sleeps, clock=lambda: now)
    assert list(client.list_comments(PR)) == []
    assert sleeps == [6.0]  # until the reset, plus one second of clock skew


def test_rate_limit_403_without_headers_waits_the_default_minute(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant(403, body={"message": "You have exceeded a secondary rate limit.", "documentation_url": "x"})
    assert list(client_for(stub, sleeps).list_comments(PR)) == []
    assert sleeps == [60.0]


def test_wait_longer_than_cap_raises_without_waiting(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant_rate_limit(status=429, retry_after=120)
    with pytest.raises(GitHubError) as caught:
        list(client_for(stub, sleeps, max_wait_s=60).list_comments(PR))
    assert caught.value.status == 429
    assert "asks to wait 120s, which would exceed the 60s cap (max_wait_s" in caught.value.message
    assert sleeps == []
    assert len(stub.requests) == 1


def test_total_wait_is_capped_across_retries(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant_rate_limit(status=429, retry_after=25, count=3)
    with pytest.raises(GitHubError, match="25s already waited|50s already waited"):
        list(client_for(stub, sleeps, max_wait_s=60).list_comments(PR))
    assert sleeps == [25.0, 25.0]


def test_retries_are_bounded(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant_rate_limit(status=429, retry_after=1, count=10)
    with pytest.raises(GitHubError, match="still rate limited after 3 retries"):
        list(client_for(stub, sleeps).list_comments(PR))
    assert sleeps == [1.0, 1.0, 1.0]
    assert len(stub.requests) == 4


def test_transient_5xx_on_get_is_retried_with_backoff(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.plant(502, count=2, body={"message": "Server Error"})
    assert list(client_for(stub, sleeps).list_comments(PR)) == []
    assert sleeps == [1.0, 2.0]


def test_post_is_never_retried_on_5xx(stub: GitHubStub, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    client = client_for(stub, sleeps)
    monkeypatch.setattr(client, "find_own_comment", lambda *a, **k: None)
    stub.plant(502, body={"message": "Server Error"})
    with pytest.raises(GitHubError) as caught:
        client.upsert_comment(PR, "report", MARKER)
    assert caught.value.status == 502
    assert sleeps == [] and calls(stub) == [("POST", f"/repos/{stub.repo}/issues/{PR}/comments")]


def test_connection_refused_becomes_github_error(sleeps: list[float]) -> None:
    port = _closed_port()
    client = GitHubClient(f"http://127.0.0.1:{port}", "o/r", WRITE_TOKEN, sleep=sleeps.append)
    with pytest.raises(GitHubError) as caught:
        list(client.list_comments(PR))
    assert caught.value.status is None
    assert "ConnectionError" in caught.value.message
    assert sleeps == [1.0, 2.0, 4.0]


def test_pagination_link_to_another_host_is_refused(stub: GitHubStub, sleeps: list[float]) -> None:
    stub.seed_many(PR, 101)
    stub.link_base = "http://evil.invalid"
    with pytest.raises(GitHubError, match="refusing to follow a link outside"):
        list(client_for(stub, sleeps).list_comments(PR))
    assert len(stub.requests) == 1


# -- contents ---------------------------------------------------------------------------------


def test_get_file_at_ref(stub: GitHubStub, sleeps: list[float]) -> None:
    pins = '{"version": 1, "note": "héllo ✓"}\n'
    stub.add_file("base-sha", "evals/envelope-pins.json", pins)
    stub.add_file("base-sha", "dir with space/ü.json", "{}")
    client = client_for(stub, sleeps)

    assert client.get_file_at_ref("evals/envelope-pins.json", "base-sha") == pins
    assert client.get_file_at_ref("dir with space/ü.json", "base-sha") == "{}"
    assert client.get_file_at_ref("evals/envelope-pins.json", "other-sha") is None
    assert client.get_file_at_ref("evals/missing.json", "base-sha") is None

    with pytest.raises(ValueError):
        client.get_file_at_ref("evals/../../../../user", "base-sha")

    first = stub.requests[0]
    assert first.path == f"/repos/{stub.repo}/contents/evals/envelope-pins.json"
    assert first.query == {"ref": ["base-sha"]}
    assert first.headers["Accept"] == "application/vnd.github.raw+json"


# -- token hygiene ----------------------------------------------------------------------------


def test_token_never_appears_in_errors_or_reprs(stub: GitHubStub, sleeps: list[float]) -> None:
    secret = WRITE_TOKEN
    client = client_for(stub, sleeps)
    errors: list[GitHubError] = []

    def capture(action: Any) -> None:
        with pytest.raises(GitHubError) as caught:
            action()
        errors.append(caught.value)

    stub.plant(500, body={"message": f"echoing your header: Bearer {secret}"})
    capture(lambda: client.upsert_comment(PR, "x", MARKER))
    capture(lambda: client.upsert_comment(PR, "x" * 70_000, MARKER))
    stub.plant_rate_limit(status=429, retry_after=999)
    capture(lambda: list(client.list_comments(PR)))
    stub.tokens[secret] = False
    capture(lambda: client.upsert_comment(PR, "x", MARKER))
    del stub.tokens[secret]
    capture(lambda: list(client.list_comments(PR)))
    refused = GitHubClient(f"http://127.0.0.1:{_closed_port()}", "o/r", secret, sleep=sleeps.append)
    capture(lambda: list(refused.list_comments(PR)))

    assert [e.status for e in errors] == [500, 422, 429, 403, 401, None]
    assert any("***" in e.message for e in errors)
    for err in errors:
        rendered = [str(err), repr(err), err.message, "".join(traceback.format_exception(err))]
        assert not any(secret in text for text in rendered), rendered
    assert secret not in repr(client) and secret not in str(client)


# -- markers and comment size ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("default", "<!-- envelope-ci:default -->"),
        ("evals/chat_v2.yaml", "<!-- envelope-ci:evals/chat_v2.yaml -->"),
        # A key that had to be cleaned carries a digest of the exact key: two suites never share a comment.
        ("my suite (prod)", f"<!-- envelope-ci:my-suite-prod~{key_digest('my suite (prod)')} -->"),
        ("x--><img src=x><!--", f"<!-- envelope-ci:x-img-src-x~{key_digest('x--><img src=x><!--')} -->"),
        ("---", f"<!-- envelope-ci:default~{key_digest('---')} -->"),
        ("", "<!-- envelope-ci:default -->"),
    ],
)
def test_marker_for(key: str, expected: str) -> None:
    assert marker_for(key) == expected


def test_marker_for_is_bounded() -> None:
    assert marker_for("a" * 500) == "<!-- envelope-ci:" + "a" * 100 + f"~{key_digest('a' * 500)} -->"


SIZES = {Detail.FULL: 200, Detail.COLLAPSED: 100, Detail.FAILING: 30}


def _levels() -> tuple[Any, list[Detail]]:
    seen: list[Detail] = []

    def render(detail: Detail) -> str:
        seen.append(detail)
        return detail.value[0].upper() * SIZES[detail]

    return render, seen


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(300, [Detail.COLLAPSED]), (200, [Detail.COLLAPSED]), (130, [Detail.COLLAPSED, Detail.FAILING])],
)
def test_fit_comment_picks_the_most_detailed_level_that_fits(limit: int, expected: list[Detail]) -> None:
    # The comment is the short form: it never renders the full report, however much room there is.
    render, seen = _levels()
    out = fit_comment(render, limit=limit, margin=100)
    assert seen == expected
    assert out == expected[-1].value[0].upper() * SIZES[expected[-1]]


def test_fit_comment_hard_trims_closing_fence_and_details() -> None:
    text = (
        f"{MARKER}\n## envelope-ci: fail\n\n<details><summary>Failing cases</summary>\n\n"
        "````text\n" + "".join(f"output line {i:03}\n" for i in range(200)) + "````\n\n</details>\n\nend\n"
    )
    seen: list[Detail] = []

    def render(detail: Detail) -> str:
        seen.append(detail)
        return text

    out = fit_comment(render, limit=1500, margin=500)

    assert seen == [Detail.COLLAPSED, Detail.FAILING]
    assert len(out) <= 1000
    kept, tail = out.split("````\n</details>\n\n> **Trimmed:** ")
    assert text.startswith(kept) and kept.endswith("\n") and kept.startswith(MARKER)
    omitted = int(re.match(r"([\d,]+) characters", tail).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert omitted == len(text) - len(kept)
    assert tail.endswith(
        "of this report were left out to fit GitHub's 1,500-character comment limit. "
        "The full report is in the job summary and in the report files (`report.md`, `report.json`).\n"
    )


def test_fit_comment_trim_outside_blocks_and_with_tilde_fences() -> None:
    plain = "".join(f"row {i}\n" for i in range(100))
    out = fit_comment(lambda _: plain, limit=500, margin=100)
    kept, note = out.split("\n> **Trimmed:** ")
    assert plain.startswith(kept) and len(out) <= 400 and note.startswith(f"{len(plain) - len(kept)} characters")

    tilde = "<details>\n<details open>\n\n~~~~\n" + "x\n" * 500
    out = fit_comment(lambda _: tilde, limit=600, margin=100)
    assert "~~~~\n</details>\n</details>\n\n> **Trimmed:** " in out and len(out) <= 500


def test_fit_comment_rejects_a_non_positive_budget() -> None:
    with pytest.raises(ValueError):
        fit_comment(lambda _: "", limit=100, margin=100)


# -- workflow commands --------------------------------------------------------------------------


def test_escaping_follows_the_toolkit() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext%3A a%2Cb"


def test_error_annotation() -> None:
    assert (
        error_annotation("evals/cases.yaml", 12, "chat-1: regressed, time", "p95 40ms -> 90ms (+125%)\nsee report")
        == "::error file=evals/cases.yaml,line=12,title=chat-1%3A regressed%2C time::p95 40ms -> 90ms (+125%25)%0Asee report"
    )
    assert error_annotation(None, None, None, "no location") == "::error::no location"
    # Untrusted text cannot start a second command on a new line.
    assert error_annotation("f,x", None, None, "ok\n::add-mask::x") == "::error file=f%2Cx::ok%0A::add-mask::x"


def test_warning_and_add_mask() -> None:
    assert warning("comment not posted: 403\r\n") == "::warning::comment not posted: 403%0D%0A"
    assert warning("w", file="a.yaml", line=3) == "::warning file=a.yaml,line=3::w"
    assert add_mask("s3cr%t\nline2") == "::add-mask::s3cr%25t%0Aline2"


# -- $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY ----------------------------------------------------


def parse_output_file(text: str) -> dict[str, str]:
    """Parse $GITHUB_OUTPUT the way actions/runner's FileCommandManager does."""

    def read_line(pos: int) -> tuple[str | None, int, str | None]:
        if pos >= len(text):
            return None, pos, None
        nl = text.find("\n", pos)
        if nl < 0:
            return text[pos:], len(text), None
        newline = "\r\n" if nl > pos and text[nl - 1] == "\r" else "\n"
        return text[pos : nl - len(newline) + 1], nl + 1, newline

    result: dict[str, str] = {}
    line, pos, _ = read_line(0)
    while line is not None:
        if line:
            eq, here = line.find("="), line.find("<<")
            if eq >= 0 and (here < 0 or eq < here):
                result[line[:eq]] = line[eq + 1 :]
            else:
                key, delimiter = line[:here], line[here + 2 :]
                start = end = pos
                value_line, pos, newline = read_line(pos)
                while value_line != delimiter:
                    assert value_line is not None, "matching delimiter not found"
                    assert newline is not None, "expected a newline"
                    end = pos - len(newline)
                    value_line, pos, newline = read_line(pos)
                result[key] = text[start:end] if end > start else ""
        line, pos, _ = read_line(pos)
    return result


def test_outputs_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "github_output"
    path.write_text("earlier=1\n", encoding="utf-8")
    values = {
        "verdict": "fail",
        "summary": "## envelope-ci\n\n| case | channel |\n|---|---|\n| a=b | x<<y |\n",
        "unicode": "✓ ⏎ naïve",
        "empty": "",
        "crlf": "a\r\nb",
    }
    write_outputs(path, values)
    assert parse_output_file(path.read_bytes().decode("utf-8")) == {"earlier": "1", **values}


def test_outputs_exact_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = uuid.UUID("12345678-1234-5678-1234-567812345678")
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    path = tmp_path / "out"
    write_outputs(path, {"verdict": "pass", "comment-url": "https://x/1"})
    delimiter = f"ghadelimiter_{fixed}"
    assert path.read_bytes() == (
        f"verdict<<{delimiter}\npass\n{delimiter}\ncomment-url<<{delimiter}\nhttps://x/1\n{delimiter}\n"
    ).encode()


def test_outputs_refuse_the_delimiter_and_bad_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = uuid.UUID("12345678-1234-5678-1234-567812345678")
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    path = tmp_path / "out"
    with pytest.raises(ValueError, match="delimiter"):
        write_outputs(path, {"ok": "fine", "bad": f"x\nghadelimiter_{fixed}\ny"})
    with pytest.raises(ValueError, match="invalid output name"):
        write_outputs(path, {"a=b": "x"})
    assert not path.exists()  # nothing half-written


def test_summary_appends_when_it_fits(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    assert append_summary(path, "# one") is False
    assert append_summary(path, "# two\n") is False
    assert path.read_text(encoding="utf-8") == "# one\n# two\n"


def test_summary_trimmed_in_bytes_counting_earlier_appends(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("previous step output\n", encoding="utf-8")
    report = "| case | note |\n|---|---|\n" + "".join(f"| c{i} | é✓ naïve |\n" for i in range(200))
    report += "\n```text\n" + "ünïcødé\n" * 100 + "```\n"
    assert append_summary(path, report, limit=2000) is True
    data = path.read_bytes()
    assert len(data) <= 2000
    text = data.decode("utf-8")
    assert text.startswith("previous step output\n| case | note |")
    assert "bytes of this summary were left out to stay under GitHub's 1 MiB step-summary limit" in text


def test_summary_trim_is_linear_in_the_text(tmp_path: Path) -> None:
    # 3 MiB in 30,000 table rows: re-measuring the whole text per line took minutes.
    rows = "".join(f"| case-{i:05d} | wrong | goodbye \\| @\u200docatcat {'x' * 60} |\n" for i in range(30_000))
    started = time.perf_counter()
    assert append_summary(tmp_path / "summary.md", rows) is True
    assert time.perf_counter() - started < 5
    data = (tmp_path / "summary.md").read_bytes()
    assert SUMMARY_LIMIT - 400 < len(data) <= SUMMARY_LIMIT
    assert data.decode("utf-8").endswith("(`report.md`, `report.json`).\n")


def test_summary_with_no_room_left_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("x" * 100, encoding="utf-8")
    assert append_summary(path, "# more", limit=90) is True
    assert path.read_text(encoding="utf-8") == "x" * 100


# -- small contracts ------------------------------------------------------------------------------


def test_error_and_result_types() -> None:
    err = GitHubError(403, "nope")
    assert (err.status, err.message, str(err), repr(err)) == (
        403,
        "nope",
        "GitHub API error 403: nope",
        "GitHubError(status=403, message='nope')",
    )
    assert str(GitHubError(None, "down")) == "GitHub API error: down"
    with pytest.raises(AttributeError):
        CommentResult(1, "u", True).id = 2  # type: ignore[misc]


def test_client_validates_its_arguments() -> None:
    with pytest.raises(ValueError):
        GitHubClient("https://api.github.com", "not-a-repo", "t")
    with pytest.raises(ValueError):
        GitHubClient("https://api.github.com", "o/r", "")
    client = GitHubClient("https://ghe.example/api/v3/", "o/r", "t")
    assert client.api_url == "https://ghe.example/api/v3"
    with pytest.raises(ValueError):
        list(client.list_comments(0))
    with pytest.raises(ValueError):
        client.upsert_comment(1, "body", "two\nlines")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
