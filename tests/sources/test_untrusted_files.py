"""Issue #27 items 3 and 8: the fixtures directory is a PR's content, and every file it leads to is held to that.

Prompt files are prompts (never in ``.git``, at most 256 KiB); what a case renders is capped per
case and per suite, llm-rubric judge prompts included; the pins file gets the fixtures' symlink
rule; a symlink loop is bad input naming it; ``--replay`` lines repeating one case read in
linear time.
"""
from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from envelope_ci.cli import collector_paused
from envelope_ci.errors import UsageError
from envelope_ci.sources.cases import load_cases
from envelope_ci.sources.recordings import read_replay
from envelope_ci.sources.refs import MAX_FILE_BYTES
from envelope_ci.sources.templates import MAX_CASE_CHARS, MAX_SUITE_CHARS
from tests.support.suites import case as prompt_case
from tests.support.suites import make_suite, run_cli, write_pins

pytestmark = pytest.mark.usefixtures("clean_env")


def repository(tmp_path: Path) -> Path:
    """A repository root with a ``.git`` holding what a clone keeps there."""
    repo = tmp_path / "repo"
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = https://token@example.invalid/x\n', "utf-8")
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n", "utf-8")
    (repo / "vendor" / "lib" / ".git").mkdir(parents=True)  # a submodule's
    (repo / "vendor" / "lib" / ".git" / "config").write_text("[core]\n", "utf-8")
    (repo / "prompts").mkdir()
    (repo / "prompts" / "support.md").write_text("You help.\n", "utf-8")
    return repo


def case(case_id: str, **fields: object) -> dict[str, object]:
    """A fixture case; one with a ``prompt_file`` sends no inline prompt."""
    data = prompt_case(case_id, **fields)
    if "prompt_file" in fields:
        del data["prompt"]
    return data


def line_of(path: Path, text: str) -> int:
    """The line of ``path`` that holds ``text`` (1-based)."""
    return next(i for i, line in enumerate(path.read_text("utf-8").splitlines(), 1) if text in line)


def problems(root: Path) -> list[str]:
    """What loading the fixtures at ``root`` refuses, one string each (``file:line: field: message``)."""
    with pytest.raises(UsageError) as caught:
        load_cases(root, set())
    return [str(p) for p in caught.value.problems]


# -- item 3: prompt files are prompts ------------------------------------------------------------


@pytest.mark.parametrize("key", ["prompt_file", "system_file"])
@pytest.mark.parametrize("ref", [
    "/.git/config",                # from the repository root
    "../.git/config",              # up from the fixtures directory
    "prompts/../../.git/HEAD",     # through ..
    "../vendor/lib/.git/config",   # a submodule's .git
    "/.GIT/config",                # as a case-insensitive file system reads it
    ".git/../../prompts/support.md",  # .git as written, though it leads elsewhere
])
def test_a_prompt_file_in_git_is_bad_input_on_its_line(tmp_path, key, ref):
    repo = repository(tmp_path)
    evals = make_suite(repo, [case("a", completion="x", **{key: ref})], name="evals")
    (evals / "prompts").mkdir()
    line = line_of(evals / "cases.yaml", f"{key}:")
    result = run_cli(["run", evals, "--out", tmp_path / "out"])
    assert result.code == 2, result.err + result.out
    assert f"cases.yaml:{line}: {key}: {ref}: in .git" in result.err
    assert "token@" not in result.err + result.out and not (tmp_path / "out").exists()


def test_a_symlink_into_git_is_refused_where_it_leads(tmp_path):
    repo = repository(tmp_path)
    evals = make_suite(repo, [case("a", completion="x", prompt_file="/prompts/innocent.txt")], name="evals")
    (repo / "prompts" / "innocent.txt").symlink_to(repo / ".git" / "config")
    found = problems(evals)
    line = line_of(evals / "cases.yaml", "prompt_file:")
    assert any(f"cases.yaml:{line}: prompt_file: /prompts/innocent.txt: in .git" in p for p in found), found


def test_a_prompt_file_from_the_working_tree_still_works(tmp_path):
    repo = repository(tmp_path)
    evals = make_suite(repo, [case("a", completion="x", system_file="/prompts/support.md")], name="evals")
    [loaded] = load_cases(evals, set())
    assert loaded.messages[0] == {"role": "system", "content": "You help.\n"}
    assert loaded.files == {"/prompts/support.md": loaded.files["/prompts/support.md"]}


def test_a_file_over_the_cap_is_bad_input_naming_it_and_the_cap_on_its_line(tmp_path):
    suite = make_suite(tmp_path, [case("big", completion="x", prompt_file="big.txt"),
                                  case("edge", completion="x", prompt_file="edge.txt")],
                       files={"big.txt": "a" * (MAX_FILE_BYTES + 1), "edge.txt": "b" * MAX_FILE_BYTES})
    line = line_of(suite / "cases.yaml", "prompt_file: big.txt")
    assert problems(suite) == [f"{suite.as_posix()}/cases.yaml:{line}: prompt_file: big.txt: larger than 256 KiB, "
                               "the most a file a case names may hold (a prompt file is a prompt): cut it down"]
    (suite / "big.txt").write_text("short", "utf-8")
    assert [c.id for c in load_cases(suite, set())] == ["big", "edge"]  # exactly the cap is fine


def test_the_file_cap_holds_for_a_file_that_grows_while_it_is_read(tmp_path, monkeypatch):
    suite = make_suite(tmp_path, [case("a", completion="x", prompt_file="p.txt")], files={"p.txt": "small"})
    real_stat = Path.stat

    def stale_stat(self, *args, **kwargs):  # the size seen before reading ("small"): the file then grows
        found = real_stat(self, *args, **kwargs)
        if self.name != "p.txt":
            return found
        return os.stat_result((found.st_mode, found.st_ino, found.st_dev, found.st_nlink, found.st_uid, found.st_gid, 5,
                               int(found.st_atime), int(found.st_mtime), int(found.st_ctime)))

    monkeypatch.setattr(Path, "stat", stale_stat)
    (suite / "p.txt").write_text("a" * (2 * MAX_FILE_BYTES), "utf-8")
    assert any("p.txt: larger than 256 KiB" in p for p in problems(suite))


def test_the_twenty_gigabyte_fixture_is_refused_in_bounded_time_and_memory(tmp_path):
    # A 126 KiB fixture: defaults that repeat a 60,000-character var 12,000 times, for 30 cases (21.6 GB).
    big = "x" * 60_000
    doc = {"defaults": {"prompt": "{{ big }}" * 7_000, "vars": {"big": big}},
           "cases": [{"id": f"c{i}", "completion": "ok"} for i in range(30)]}
    suite = make_suite(tmp_path, files={"bomb.json": json.dumps(doc)})
    assert (suite / "bomb.json").stat().st_size < 130 * 1024
    tracemalloc.start()
    started = time.monotonic()
    try:
        found = problems(suite)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 10
    assert peak < 32 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert len(found) == 30 and all("renders more than 1 MiB of text" in p for p in found)
    assert found[0].startswith(f"{suite.as_posix()}/bomb.json:1: prompt: case 'c0' renders more than 1 MiB")


def test_the_case_cap_is_exact_and_names_the_case_the_field_and_the_file(tmp_path):
    filler = "{{ v }}"
    suite = make_suite(tmp_path, [
        case("fits", prompt=filler, vars={"v": "a" * MAX_CASE_CHARS}, completion="x"),
        case("over", prompt=filler, vars={"v": "a" * (MAX_CASE_CHARS + 1)}, completion="x"),
        case("via-file", prompt_file="p.txt", vars={"v": "b" * 1000}, completion="x"),
    ], files={"p.txt": filler * 1100})
    found = problems(suite)
    assert len(found) == 2, found
    line = line_of(suite / "cases.yaml", "id: over") + 1
    assert found[0].startswith(f"{suite.as_posix()}/cases.yaml:{line}: prompt: case 'over' renders more than 1 MiB")
    assert "prompt_file: case 'via-file' renders more than 1 MiB of text (with p.txt)" in found[1]


def test_llm_rubric_judge_prompts_count_toward_the_case_cap(tmp_path):
    question = "q" * 300_000
    rubric = {"type": "llm-rubric", "value": "Answers politely", "endpoint": "judge"}
    suite = make_suite(tmp_path, [case("two", prompt=question, completion="x", **{"assert": [rubric, rubric]}),
                                  case("three", prompt=question, completion="x", **{"assert": [rubric] * 3})])
    found = problems(suite)
    assert len(found) == 1 and ": assert.2.value: case 'three' renders more than 1 MiB of text" in found[0], found


def test_the_suite_cap_counts_every_case(tmp_path):
    per_case = 1_040_000  # under the case cap; 65 of them pass the suite's
    count = MAX_SUITE_CHARS // per_case + 1
    doc = {"defaults": {"prompt": "{{ v }}", "vars": {"v": "s" * per_case}, "completion": "ok"},
           "cases": [{"id": f"c{i}"} for i in range(count)]}
    suite = make_suite(tmp_path, files={"cases.yaml": yaml.safe_dump(doc)})
    found = problems(suite)
    assert len(found) == 1, found[:3]
    assert f"prompt: the cases up to 'c{count - 1}' render more than 64 MiB of text" in found[0]
    doc["cases"] = doc["cases"][:-1]
    (suite / "cases.yaml").write_text(yaml.safe_dump(doc), "utf-8")
    assert len(load_cases(suite, set())) == count - 1


# -- item 8: the pins file and symlink loops -----------------------------------------------------


def test_a_pins_symlink_to_dev_zero_is_bad_input_not_no_pins(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x", must_include=["x"])])
    (suite / "envelope-pins.json").symlink_to("/dev/zero")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2, result.out
    assert "envelope-pins.json: a symlink out of the pins file's folder (to /dev/zero)" in result.err


def test_pins_that_are_no_regular_file_of_their_folder_are_bad_input(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x", must_include=["x"])])
    assert write_pins(suite, tmp_path / "first").code == 0
    pins = suite / "envelope-pins.json"
    outside = tmp_path / "elsewhere.json"
    pins.rename(outside)
    expected = {
        "out": (lambda: pins.symlink_to(outside), "a symlink out of the pins file's folder"),
        "to nothing": (lambda: pins.symlink_to(suite / "gone.json"), "a symlink to nothing"),
        "a folder": (lambda: pins.mkdir(), "not a regular file"),
    }
    for make, message in expected.values():
        make()
        result = run_cli(["run", suite, "--out", tmp_path / "out"])
        assert result.code == 2 and f"envelope-pins.json: {message}" in result.err, (message, result.err)
        pins.rmdir() if pins.is_dir() and not pins.is_symlink() else pins.unlink()
    (suite / "pins").mkdir()
    outside.rename(suite / "pins" / "real.json")
    pins.symlink_to(Path("pins") / "real.json")  # inside its folder: read as the pins
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 0, result.err
    fresh = make_suite(tmp_path, [case("b", completion="x")], name="fresh")  # no pins at all: a first run
    assert run_cli(["run", fresh, "--out", tmp_path / "o2"]).code == 0


@pytest.mark.parametrize("loop", [("loop1", "loop2"), ("self", "self")])
def test_a_symlink_loop_in_the_fixtures_is_bad_input_naming_it(tmp_path, loop):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    first, second = loop
    (suite / first).symlink_to(second)
    if second != first:
        (suite / second).symlink_to(first)
    for command in (["run", suite, "--out", tmp_path / "out"], ["hash", suite]):
        result = run_cli(command)
        assert result.code == 2, result.err
        assert f"{(suite / first).as_posix()}: a symlink loop" in result.err and "internal error" not in result.err


def test_a_prompt_file_that_loops_is_bad_input_on_its_line(tmp_path):
    repo = repository(tmp_path)
    evals = make_suite(repo, [case("a", completion="x", prompt_file="/prompts/loop.txt")], name="evals")
    (repo / "prompts" / "loop.txt").symlink_to("loop.txt")
    found = problems(evals)
    line = line_of(evals / "cases.yaml", "prompt_file:")
    assert any(f"cases.yaml:{line}: prompt_file: /prompts/loop.txt: a symlink loop" in p for p in found), found


def test_replay_lines_repeating_one_case_read_in_linear_time(tmp_path):
    env = {"http_status": 200, "elapsed_ms": 1.0, "headers": {},
           "body": {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}}

    def timed(lines: int, ids: int) -> float:
        path = tmp_path / f"r{lines}-{ids}.jsonl"
        lines_text = (json.dumps({"id": f"c{i % ids}", "recorded": env}) + "\n" for i in range(lines))
        path.write_text("".join(lines_text), "utf-8")
        best = float("inf")
        for _ in range(2):
            # the collector paused, as the CLI pauses it for an offline run (cli.collector_paused): what is timed is
            # the reading, not how many objects earlier tests left for a full collection to walk
            with collector_paused(True):
                started = time.perf_counter()
                replay = read_replay(path, {f"c{i}" for i in range(ids)})
                best = min(best, time.perf_counter() - started)
        assert sum(len(v) for v in replay.envelopes.values()) == lines
        return best

    small, large, spread = timed(10_000, 1), timed(40_000, 1), timed(40_000, 400)
    assert large < 10 * small, (small, large)  # linear: about 4x; quadratic: 16x
    assert large < 3 * spread, (large, spread)
