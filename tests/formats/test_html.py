"""report.html: one self-contained page, every gate shown, untrusted text inert in the DOM, answers against the pinned
ones read from git at the pins' commit."""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from msgspec.structs import replace

from envelope_ci.formats import html as page
from envelope_ci.formats.escape import clean
from envelope_ci.formats.registry import write_reports
from envelope_ci.model import Outcome
from envelope_ci.report.model import Report
from envelope_ci.report.pinned_answers import PinnedAnswers, read_pinned_answers
from tests.support.hostile import GATES, HOSTILE, hostile_report, pinned_differently
from tests.support.strategies import EDGE_TEXT
from tests.support.suites import case, chat_body, example_report_text, git, recorded, run_report, write_pins

pytestmark = pytest.mark.usefixtures("clean_env")

# The elements the page is made of: anything else in the DOM came from the text it shows.
OURS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "h4", "p", "strong", "code",
        "div", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a", "pre", "section", "article",
        "button", "script", "svg", "rect", "text", "line", "del", "ins"}
VOID = {"meta"}


class Dom(HTMLParser):
    """The page as a browser's parser reads it: every element and attribute, and each element's text (its
    children's included)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.attrs: list[tuple[str, str, str | None]] = []
        self.texts: dict[str, list[str]] = {}
        self._open: list[tuple[str, list[str]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += [(tag, name, value) for name, value in attrs]
        if tag not in VOID:
            self._open.append((tag, []))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += [(tag, name, value) for name, value in attrs]

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, parts = self._open.pop()
            text = "".join(parts)
            self.texts.setdefault(name, []).append(text)
            if self._open:
                self._open[-1][1].append(text)
            if name == tag:
                return

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][1].append(data)


@pytest.fixture(scope="module")
def example() -> Report:
    """The support-bot example's report: every case pinned, two known failures."""
    return Report.from_json(json.loads(example_report_text("support-bot")))


def test_hostile_text_stays_text_in_the_dom(example: Report) -> None:
    report = hostile_report(example)
    dom = Dom(page.render_html(report, pinned=pinned_differently(report)))
    assert set(dom.tags) <= OURS, set(dom.tags) - OURS
    assert dom.tags["script"] == 1 and dom.texts["script"] == [page._SCRIPT]
    assert dom.tags["style"] == 1 and dom.tags["svg"] == 2  # the time and size charts
    assert not [a for a in dom.attrs if a[1].startswith("on") or a[1] in ("src", "style", "srcdoc", "formaction")]
    assert all(re.fullmatch(r"#case-\d+", value or "") for _, name, value in dom.attrs if name == "href")
    shown = [clean(t) for t in HOSTILE]
    assert set(shown) <= set(dom.texts["code"])  # every id, as it reads, in its card's heading
    assert set(shown) <= set(dom.texts["pre"])  # every answer, and every pinned one, whole under its marks
    assert {f"inconclusive: {t}" for t in shown} | set(shown) <= set(dom.texts["p"])  # blockers and notes


def test_hostile_text_cannot_break_out_of_an_attribute_or_the_charts(example: Report) -> None:
    report = hostile_report(example)
    text = page.render_html(report, pinned=pinned_differently(report))
    data_outcomes = re.findall(r'data-outcome="([^"]*)"', text)
    assert set(data_outcomes) <= {o.value for o in Outcome} | {"all"}
    assert len(re.findall(r"<svg ", text)) == 2 and text.count("</svg>") == 2
    assert "<script>alert" not in text and "<svg onload" not in text


def test_every_gate_is_shown_and_each_broken_case_links_to_its_card(example: Report) -> None:
    report = hostile_report(example)
    dom = Dom(page.render_html(report, pinned=PinnedAnswers()))
    classes = Counter(v for t, n, v in dom.attrs if t == "article" and n == "class")
    assert {f"case gate-{g.value}" for g, _ in GATES} == set(classes)
    assert sum(classes.values()) == len(report.cases)
    ids = {v for t, n, v in dom.attrs if t == "article" and n == "id"}
    links = {v[1:] for t, n, v in dom.attrs if n == "href" and v}
    assert links and links <= ids
    headings = dom.texts["h2"]
    for title in ("Regressions", "Other cases failing the gate", "Undelivered", "Next steps", "Alerts",
                  "Channels by stratum"):
        assert any(h.startswith(title) for h in headings), title


def test_the_page_loads_nothing_and_allows_only_its_own_style_and_script(example: Report) -> None:
    text = page.render_html(example, pinned=PinnedAnswers())
    dom = Dom(text)
    policy = next(v for t, n, v in dom.attrs if t == "meta" and n == "content" and v and "default-src" in v)
    assert policy is not None
    for inline in (dom.texts["style"][0], dom.texts["script"][0]):
        assert "'sha256-" + base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode() + "'" in policy
    assert "default-src 'none'" in policy and "img-src 'none'" in policy
    assert not [a for a in dom.attrs if a[1] in ("src", "srcset", "data", "poster", "action")]
    assert "url(" not in dom.texts["style"][0] and "@import" not in dom.texts["style"][0]


def test_the_cases_can_be_filtered_by_outcome_but_are_all_shown_without_scripts(example: Report) -> None:
    dom = Dom(page.render_html(example, pinned=PinnedAnswers()))
    hidden = [t for t, n, v in dom.attrs if n == "hidden"]
    assert hidden == ["div"]  # the filter's buttons, which only the script can use; no case
    buttons = [v for t, n, v in dom.attrs if t == "button" and n == "data-outcome"]
    assert buttons == ["all", *(o.value for o in Outcome if any(c.outcome is o for c in example.cases))]


def test_the_page_comes_in_parts_a_case_at_a_time(example: Report) -> None:
    pinned = pinned_differently(example)
    parts = list(page.html_parts(example, pinned))
    assert "".join(parts) == page.render_html(example, pinned=pinned)
    assert len(parts) == len(example.cases) + 2
    assert all(part.startswith("<article") for part in parts[1:-1])


def test_html_is_written_only_when_asked_for_and_as_it_renders(example: Report, tmp_path: Path) -> None:
    plain = write_reports(example, tmp_path / "plain")
    assert not (tmp_path / "plain" / "report.html").exists() and len(plain) == 3
    written = write_reports(example, tmp_path / "asked", ("html",))
    assert written[-1] == tmp_path / "asked" / "report.html"
    assert written[-1].read_text("utf-8") == page.render_html(example, pinned=read_pinned_answers(example))


def test_changed_words_are_marked_on_each_side() -> None:
    old, new = page.marked("The table is booked for four at eight.", "The table is booked for five at eight!")
    assert old == "The table is booked for <del>four</del> at eight<del>.</del>"
    assert new == "The table is booked for <ins>five</ins> at eight<ins>!</ins>"
    assert page.marked("<b>", "<i>") == ("&lt;<del>b</del>&gt;", "&lt;<ins>i</ins>&gt;")


_MARKS = re.compile(r"</?(?:del|ins)>")


@given(pinned=EDGE_TEXT, now=EDGE_TEXT)
def test_both_answers_read_whole_under_their_marks(pinned: str, now: str) -> None:
    old, new = page.marked(pinned, now)
    assert html.unescape(_MARKS.sub("", old)) == clean(pinned)
    assert html.unescape(_MARKS.sub("", new)) == clean(now)
    assert "<" not in _MARKS.sub("", old + new)


# -- the pinned answer, from git at the pins' commit -------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None,
                               reason="git is not installed: the pinned answers come from it")

ANSWER_THEN = "The table is booked for four at eight."
ANSWER_NOW = "The table is booked for five at eight."




def record(suite: Path, answer: str) -> None:
    """The suite's recorded answers, kept beside its fixture file as ``import`` writes them."""
    line = {"id": "booking", "recorded": recorded(chat_body(answer))}
    (suite / "cases.yaml.recorded.jsonl").write_text(json.dumps(line) + "\n", "utf-8")


@pytest.fixture
def pinned_repo(tmp_path: Path) -> Path:
    """A repository whose one commit holds a suite, its recorded answer and the pins made from it."""
    repo = tmp_path / "repo"
    suite = repo / "evals"
    suite.mkdir(parents=True)
    (suite / "cases.yaml").write_text(json.dumps([case("booking", must_include=["booked"])]), "utf-8")
    record(suite, ANSWER_THEN)
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pins")
    return repo


def html_of(suite: Path, out: Path) -> str:
    result, report = run_report(suite, out, "--format", "html")
    assert report is not None, result.err
    assert str(out / "report.html") in result.out
    return (out / "report.html").read_text("utf-8")


@needs_git
def test_a_re_recorded_answer_is_shown_beside_the_pinned_one_with_its_changes_marked(pinned_repo: Path,
                                                                                    tmp_path: Path) -> None:
    record(pinned_repo / "evals", ANSWER_NOW)
    text = html_of(pinned_repo / "evals", tmp_path / "out")
    commit = git(pinned_repo, "rev-parse", "HEAD").strip()
    assert f"Pinned (recorded at {commit[:12]})" in text
    assert "booked for <del>four</del> at" in text and "booked for <ins>five</ins> at" in text


@needs_git
def test_an_answer_as_pinned_is_shown_once(pinned_repo: Path, tmp_path: Path) -> None:
    text = html_of(pinned_repo / "evals", tmp_path / "out")
    assert f"This run (the same as pinned)</h4><pre class=\"answer\">{ANSWER_THEN}</pre>" in text
    assert "<del>" not in text


def test_without_git_the_page_says_only_that_the_answers_digest_changed(tmp_path: Path) -> None:
    suite = tmp_path / "evals"
    suite.mkdir()
    (suite / "cases.yaml").write_text(json.dumps([case("booking", must_include=["booked"])]), "utf-8")
    record(suite, ANSWER_THEN)
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    record(suite, ANSWER_NOW)
    text = html_of(suite, tmp_path / "out")
    assert "The answer's digest changed since the pins" in text
    assert "git could not show the pinned one" in text
    assert ANSWER_THEN not in text and "<del>" not in text


@needs_git
def test_pins_changed_since_their_commit_are_not_read_as_the_pinned_ones(pinned_repo: Path, tmp_path: Path) -> None:
    pins = pinned_repo / "evals" / "envelope-pins.json"
    pins.write_text(pins.read_text("utf-8") + "\n", "utf-8")
    _, data = run_report(pinned_repo / "evals", tmp_path / "out")
    found = read_pinned_answers(Report.from_json(data))
    assert found.texts == {} and found.unknown is not None and "pins not committed yet" in found.unknown


@needs_git
def test_a_shallow_clone_that_stops_before_the_pins_commit_reads_no_pinned_answer(pinned_repo: Path,
                                                                                   tmp_path: Path) -> None:
    (pinned_repo / "README").write_text("later\n", "utf-8")
    git(pinned_repo, "add", "README")
    git(pinned_repo, "commit", "-qm", "later")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", pinned_repo.resolve().as_uri(), str(clone))
    _, data = run_report(clone / "evals", tmp_path / "out")
    found = read_pinned_answers(Report.from_json(data))
    assert found.texts == {} and found.unknown is not None and "shallow" in found.unknown


def test_no_pins_file_reads_no_pinned_answer(example: Report, tmp_path: Path) -> None:
    found = read_pinned_answers(replace(example, run=replace(example.run, pins=str(tmp_path / "none.json"))))
    assert found == PinnedAnswers(unknown=f"the pins file is not here ({(tmp_path / 'none.json').as_posix()}): no pins "
                                          "yet, or the repository is not checked out where the report was written")


@needs_git
def test_a_sidecar_line_that_cannot_be_read_is_no_pinned_answer_and_the_card_says_why(pinned_repo: Path,
                                                                                      tmp_path: Path) -> None:
    _, data = run_report(pinned_repo / "evals", tmp_path / "out")
    report = Report.from_json(data)
    bad = {"id": "booking", "recorded": {**recorded(chat_body(ANSWER_THEN)), "attempts": 1e400}}
    sidecar = pinned_repo / "evals" / "cases.yaml.recorded.jsonl"
    sidecar.write_text('{"id": [1], "recorded": {}}\n' + json.dumps(bad) + "\n", "utf-8")
    git(pinned_repo, "commit", "-qam", "pins", "--amend")  # the pins' commit now holds the bad lines
    found = read_pinned_answers(report)
    assert found.texts == {} and "line 2 of" in found.why["booking"]
    changed = replace(report, fixtures=replace(report.fixtures, modified=("booking",)))  # else shown as graded
    assert "line 2 of" in page.render_html(changed, pinned=found)


@needs_git
def test_a_recording_the_pin_was_not_made_from_is_not_shown_as_pinned(pinned_repo: Path, tmp_path: Path) -> None:
    record(pinned_repo / "evals", ANSWER_NOW)
    git(pinned_repo, "commit", "-qam", "pins", "--amend")  # re-recorded, and committed with the old pins
    text = html_of(pinned_repo / "evals", tmp_path / "out")
    assert "the same as pinned" not in text and "Pinned" not in text
    assert "The answer's digest changed since the pins" in text and "is not the one its pin was made from" in text


def test_the_lowered_baseline_names_as_many_cases_as_report_md_does(example: Report) -> None:
    report = hostile_report(example)
    ids = tuple(f"lowered-{i:02}" for i in range(25))
    assert report.base is not None
    text = page.render_html(replace(report, base=replace(report.base, downgraded=ids)), pinned=PinnedAnswers())
    assert "lowered-19" in text and "lowered-20" not in text and "downgrades 25 pins" in text
