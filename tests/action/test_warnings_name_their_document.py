"""A warning that sends the reader to a document names one that exists, with the section it names: the read-only
token's advice points at docs/action.md's 'Pull requests from forks', where that section is."""
from __future__ import annotations

import re

from envelope_ci.action.publish import post_comment
from envelope_ci.github.rest import GitHubError
from tests.support.suites import REPO_ROOT

# `docs/action.md`, `SECURITY.md`; with a section: `(docs/action.md, 'Pull requests from forks')`. (`report.md` and
# `comment.md` are files a run writes; `support.md` a prompt file of `init`'s; `IMPORT.md` the list `import` writes
# beside a converted promptfoo suite: not documents.)
CITED = re.compile(r"\b(docs/[a-z-]+\.md|(?!IMPORT\.md)[A-Z]+\.md)(?:, '([^']+)')?")


def cited(text: str) -> list[tuple[str, str | None]]:
    return [(doc, section or None) for doc, section in CITED.findall(text)]


def missing(doc: str, section: str | None) -> str | None:
    """Why a citation leads nowhere, or None."""
    path = REPO_ROOT / doc
    if not path.is_file():
        return f"{doc} does not exist"
    headings = {line.lstrip("#").strip() for line in path.read_text("utf-8").splitlines() if line.startswith("#")}
    return None if section is None or section in headings else f"{doc} has no section {section!r}"


class _ReadOnly:
    """A GitHub client whose token may read but not write: the 403 a fork's pull request gets."""

    def viewer_login(self) -> str:
        return "github-actions[bot]"

    def upsert_comment(self, *args: object, **kwargs: object) -> None:
        raise GitHubError(403, "Resource not accessible by integration")


def test_the_read_only_token_warning_names_the_section_on_fork_pull_requests():
    pr = {"head": {"repo": {"full_name": "someone/widgets"}}}
    url, why = post_comment(_ReadOnly(), 7, "body", "<!-- envelope-ci:evals -->", pr, "octo-org/widgets")
    assert url == "" and why is not None and "fork someone/widgets" in why
    assert ("docs/action.md", "Pull requests from forks") in cited(why)
    assert [problem for doc, section in cited(why) if (problem := missing(doc, section))] == []


def test_every_document_the_package_cites_exists_with_the_section_it_names():
    found = {}
    for source in sorted((REPO_ROOT / "envelope_ci").rglob("*.py")):
        for doc, section in cited(source.read_text("utf-8")):
            problem = missing(doc, section)
            if problem:
                found[f"{source.relative_to(REPO_ROOT).as_posix()}: {doc}"] = problem
    assert found == {}
