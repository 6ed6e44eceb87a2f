"""``envelope-ci init``: a fixtures directory that passes offline as written, every setting at its default, a valid workflow."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from envelope_ci.model import Thresholds
from envelope_ci.sources.cases import load_cases
from envelope_ci.sources.settings import CONFIG_SCHEMA, load_file_config
from tests.support.suites import chat_body, recorded, run_cli, run_report, write_replay

pytestmark = pytest.mark.usefixtures("clean_env")

WORKFLOW = Path(".github/workflows/envelope-ci.yml")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """An empty repository root as the current directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_init_run_write_pins_run_passes_on_a_fresh_directory(repo):
    result = run_cli(["init"])
    assert result.code == 0, result.err
    first, report = run_report(Path("evals"), repo / "out1")
    assert first.code == 0, first.out
    assert report["summary"]["total"] == 4 and report["summary"]["counts"]["right"] == 4
    assert run_cli(["run", "evals", "--out", repo / "out2", "--lane", "adjudication", "--write-pins"]).code == 0
    again, report = run_report(Path("evals"), repo / "out3")
    assert again.code == 0, again.out
    assert report["verdict"] == "pass" and report["lanes"]["matched_fingerprints"] == 4 and report["fixtures"]["changed"] is False


def test_init_prints_what_it_wrote_and_the_next_three_commands(repo):
    out = run_cli(["init"]).out
    assert "  evals/support.yaml\n" in out and "  .github/workflows/envelope-ci.yml\n" in out
    commands = [line.strip() for line in out.split("next:\n")[1].splitlines() if not line.strip().startswith("#")]
    assert commands == [
        "envelope-ci run evals",
        "envelope-ci run evals --lane adjudication --write-pins",
        "git add evals .github/workflows/envelope-ci.yml && git commit -m 'Add envelope-ci evals and pins'",
    ]


def test_the_cases_cover_json_tools_templates_and_two_strata(repo):
    run_cli(["init"])
    cases = {c.id: c for c in load_cases(Path("evals"), set())}
    kinds = {c.id: {e.name for e in c.expectations} for c in cases.values()}
    assert "is-json" in kinds["order-status-json"] and "json-subset" in kinds["order-status-json"]
    assert "tool-call" in kinds["lookup-order-tool"] and cases["lookup-order-tool"].request["tools"]
    assert set(cases["refund-window"].files) == {"prompts/support.md", "prompts/refund-request.md"}
    assert cases["refund-window"].messages[-1]["content"].startswith("I got my tent 12 days ago")
    assert "Acme Outdoor" in cases["greeting"].messages[0]["content"]
    assert sorted(c.stratum for c in cases.values()) == ["easy", "easy", "medium", "medium"]


def test_the_cases_fail_wrong_answers(repo):
    """The scaffold's assertions bite: a plain wrong answer fails every case."""
    run_cli(["init"])
    wrong = recorded(chat_body("I cannot help with that, as an AI."))
    replay = write_replay(repo / "wrong.jsonl", [(cid, wrong) for cid in ("order-status-json", "greeting", "refund-window", "lookup-order-tool")])
    result, report = run_report(Path("evals"), repo / "out", "--replay", replay)
    assert result.code == 1
    assert {row["id"]: row["label"] for row in report["cases"]} == {
        "order-status-json": "schema", "greeting": "wrong", "refund-window": "wrong", "lookup-order-tool": "wrong"}


def test_editing_the_prompt_file_fails_fixtures_changed_naming_it(repo):
    run_cli(["init"])
    assert run_cli(["run", "evals", "--out", repo / "pins", "--lane", "adjudication", "--write-pins"]).code == 0
    with open("evals/prompts/support.md", "a", encoding="utf-8") as fh:
        fh.write("Always apologise.\n")
    result, report = run_report(Path("evals"), repo / "out")
    # The scaffold's recordings answered the old prompt: stale as well, until re-recorded.
    assert result.code == 1 and report["alerts"] == ["fixtures_changed", "stale_recording"]
    assert report["fixtures"]["files_changed"] == ["prompts/support.md"]
    assert report["fixtures"]["modified"] == ["greeting", "lookup-order-tool", "refund-window"]


def settings_lines(text):
    return [line for line in text.splitlines() if re.match(r"# [a-z_]+: ", line)]


def test_the_settings_file_lists_every_setting_at_its_default(repo):
    run_cli(["init"])
    text = Path("evals/envelope-ci.yaml").read_text("utf-8")
    listed = [line.split(":")[0][2:] for line in settings_lines(text)]
    assert listed == list(CONFIG_SCHEMA["properties"])
    assert load_file_config(Path("evals"), None).thresholds == Thresholds()  # all commented out
    Path("evals/envelope-ci.yaml").write_text("\n".join(line[2:] for line in settings_lines(text)) + "\n", "utf-8")
    settings = load_file_config(Path("evals"), None)  # uncommented: valid, and exactly the defaults
    assert settings.thresholds == Thresholds() and settings.headers == {}


def test_it_refuses_to_overwrite_and_then_writes_nothing(repo):
    Path("evals").mkdir()
    Path("evals/support.yaml").write_text("mine\n", "utf-8")
    result = run_cli(["init"])
    assert result.code == 2
    assert result.err_lines == ["error: evals/support.yaml: already exists: init never overwrites a file; move it away, or init another directory"]
    assert [p.as_posix() for p in repo.rglob("*") if p.is_file()] == [(repo / "evals/support.yaml").as_posix()]
    assert Path("evals/support.yaml").read_text("utf-8") == "mine\n"


def test_an_existing_workflow_is_refused_unless_no_workflow(repo):
    WORKFLOW.parent.mkdir(parents=True)
    WORKFLOW.write_text("name: mine\n", "utf-8")
    assert run_cli(["init", "billing-evals"]).code == 2
    assert not Path("billing-evals").exists()
    result = run_cli(["init", "billing-evals", "--no-workflow"])
    assert result.code == 0 and ".github" not in result.out
    assert "git add billing-evals && git commit" in result.out
    assert WORKFLOW.read_text("utf-8") == "name: mine\n"


def test_the_workflow_names_the_directory_and_is_valid(repo):
    assert run_cli(["init", "tests/llm evals"]).code == 0
    workflow = yaml.safe_load(WORKFLOW.read_text("utf-8"))
    (step,) = [s for s in workflow["jobs"]["evals"]["steps"] if s.get("id") == "envelope"]
    assert step["with"] == {"fixtures": "tests/llm evals"}
    if shutil.which("check-jsonschema") is None:
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema)")
    check = subprocess.run(["check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_directory_outside_the_current_one_needs_no_workflow(repo, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "evals"
    result = run_cli(["init", elsewhere])
    assert result.code == 2 and "run init from the repository's root, or pass --no-workflow" in result.err
    assert run_cli(["init", elsewhere, "--no-workflow"]).code == 0
