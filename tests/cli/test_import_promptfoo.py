"""``envelope-ci import promptfooconfig.yaml --into DIR``: a promptfoo config becomes a suite that loads, with every
convertible assertion, and IMPORT.md lists the rest with why."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from envelope_ci.sources.cases import load_cases
from tests.support.fake_openai import Behaviour
from tests.support.suites import run_cli, run_report

pytestmark = pytest.mark.usefixtures("clean_env")

DATA = Path(__file__).resolve().parents[1] / "data" / "promptfoo"
CONFIGS = ("chat", "csv", "rubric")


def imported(tmp_path: Path, name: str, *args: str) -> tuple[Path, str]:
    """Import one of the three configs into a fresh directory; the directory and the command's output."""
    into = tmp_path / f"evals-{name}"
    result = run_cli(["import", DATA / name / "promptfooconfig.yaml", "--into", into, *args])
    assert result.code == 0, result.err
    return into, result.out


def fixture(into: Path) -> dict:
    return yaml.safe_load((into / "promptfoo.yaml").read_text("utf-8"))


def names(into: Path) -> dict[str, list[str]]:
    """Each loaded case's assertions by name: the suite loads as envelope-ci reads it."""
    return {c.id: [e.name for e in c.expectations] for c in load_cases(into, set())}


def test_a_chat_prompt_file_becomes_messages_and_list_vars_a_matrix(tmp_path):
    into, out = imported(tmp_path, "chat")
    assert "converted 2 case(s)" in out
    data = fixture(into)
    assert data["defaults"]["messages"][1] == {"role": "user", "content": "Who won the world series in {{ year }}?"}
    first, second = data["cases"]
    assert first["assert"] == [{"type": "icontains", "value": "dodgers"},
                               {"type": "not-contains", "value": "I don't know"}]
    assert second["vars"] == {"year": [1990, 2000]}
    assert second["assert"][1]["value"] == ["Yankees", "Braves", "Blue Jays", "Diamondbacks", "Twins", "Reds"]
    loaded = names(into)
    assert loaded == {"World-series-2020": ["icontains", "not-contains"],
                      "World-series-by-decade[year=1990]": ["regex", "contains-any"],
                      "World-series-by-decade[year=2000]": ["regex", "contains-any"]}
    assert load_cases(into, set())[0].messages[1]["content"] == "Who won the world series in 2020?"


def test_an_openai_compatible_provider_becomes_the_run_flags_never_a_setting(tmp_path):
    into, _ = imported(tmp_path, "chat")
    notes = (into / "IMPORT.md").read_text("utf-8")
    assert ('EVAL_API_KEY="$LOCAL_LLM_KEY" envelope-ci run ' + into.as_posix() +
            " --base-url http://localhost:8080/v1 --model llama-3.1-8b-instruct --temperature 0") in notes
    assert "`base-url: http://localhost:8080/v1`, `model: llama-3.1-8b-instruct`, `provider: openai-chat`" in notes
    assert "- `providers[0].config.max_tokens`: `128`" in notes
    assert "localhost:8080" not in (into / "envelope-ci.yaml").read_text("utf-8")


def test_a_csv_of_tests_maps_expected_columns_to_assertions(tmp_path):
    into, _ = imported(tmp_path, "csv")
    cases = {c["id"]: c for c in fixture(into)["cases"]}
    assert cases["French-greeting"]["vars"] == {"language": "French", "input": "Hello world"}
    assert cases["French-greeting"]["assert"] == [{"type": "contains", "value": "Bonjour"},
                                                  {"type": "not-icontains", "value": "hello"}]
    assert cases["Spanish-greeting"]["assert"] == [{"type": "icontains", "value": "buenos"}]
    assert cases["German-thanks"]["assert"] == [{"type": "equals", "value": "Danke"}]  # no prefix: equals
    assert cases["Italian-farewell"]["assert"] == [{"type": "contains-any", "value": ["Arrivederci", "Ciao"]}]
    assert names(into)["Italian-farewell"] == ["contains-any"]
    notes = (into / "IMPORT.md").read_text("utf-8")
    assert "- `tests.csv[4].assert[1]`: `javascript` — not converted: runs code" in notes
    assert "- `tests.csv[1].__metric`: `accuracy` — not converted" in notes
    assert "--base-url https://api.openai.com/v1 --model gpt-4o-mini" in notes


def test_default_test_asserts_become_file_defaults_and_the_rubric_a_judge_endpoint(tmp_path):
    into, _ = imported(tmp_path, "rubric")
    data = fixture(into)
    assert data["defaults"]["vars"] == {"company": "Northwind"}
    assert data["defaults"]["assert"] == [
        {"type": "not-icontains", "value": "as an AI"},
        {"type": "llm-rubric", "value": "Is polite and answers in one paragraph", "endpoint": "judge"},
        {"type": "latency", "threshold": 5000}]
    cases = {c["id"]: c for c in data["cases"]}
    assert cases["Refund-window"]["assert"][1] == {  # its {{question}} filled for this case: assertions are no templates
        "type": "llm-rubric", "value": 'Answers the question "How long do I have to return boots?" without inventing '
        "a policy", "endpoint": "judge"}
    assert cases["Shipping-cost"]["assert"] == [
        {"type": "similar", "value": "Shipping is free on orders over 50 euros.", "threshold": 0.8}]
    assert names(into) == {"Refund-window": ["not-icontains", "llm-rubric", "latency", "icontains", "llm-rubric"],
                           "Shipping-cost": ["not-icontains", "llm-rubric", "latency", "similar"]}
    settings = yaml.safe_load((into / "envelope-ci.yaml").read_text("utf-8"))
    assert settings["endpoints"]["judge"] == {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY",
                                              "model": "gpt-4o-mini", "provider": "openai-chat"}
    assert settings["endpoints"]["embeddings"]["model"] == "text-embedding-3-large"


def test_what_the_rubric_config_cannot_convert_is_listed_with_why(tmp_path):
    into, _ = imported(tmp_path, "rubric")
    notes = (into / "IMPORT.md").read_text("utf-8")
    for item in ("- `prompts[0]`: `{{ name | upper }}` — not converted: a Nunjucks expression",
                 "- `tests[0].assert[1]`: `javascript` — not converted: runs code",
                 "- `tests[0].assert[2].weight`: `2` — not converted: only weighs promptfoo's score",
                 "- `tests[1].threshold`: `0.5` — not converted: envelope-ci fails a case on any failed assertion",
                 "- `tests[1].assert[1]`: `contains-json` — not converted: envelope-ci has no assertion of this type",
                 "- `tests[0].vars.name`: a variable the prompt does not use",
                 "- `providers[1].label`: `baseline` — not converted"):
        assert item in notes
    assert "## Not converted (8)" in notes
    assert ("--base-url https://api.anthropic.com --model claude-3-5-haiku-20241022 --provider anthropic-messages"
            in notes)
    assert ("--endpoint judge=https://api.openai.com/v1 --endpoint embeddings=https://api.openai.com/v1 "
            "--allow-key-env OPENAI_API_KEY") in notes


@pytest.mark.parametrize("name", CONFIGS)
def test_dry_run_prints_the_not_converted_list_and_writes_nothing(tmp_path, name):
    into, out = imported(tmp_path, name, "--dry-run")
    assert not into.exists()
    written, _ = imported(tmp_path / "real", name)
    listed = (written / "IMPORT.md").read_text("utf-8").split("## Not converted", 1)[1].splitlines()[2:]
    assert out.splitlines() == [f"not converted ({len([x for x in listed if x])}):",
                                *(f"  {line}" for line in listed if line)]


def test_an_import_over_existing_files_writes_nothing_unless_forced(tmp_path):
    into, _ = imported(tmp_path, "csv")
    (into / "IMPORT.md").write_text("mine\n", "utf-8")
    (into / "promptfoo.yaml").unlink()
    again = run_cli(["import", DATA / "csv" / "promptfooconfig.yaml", "--into", into])
    assert again.code == 2
    assert "IMPORT.md: already exists" in again.err
    assert not (into / "promptfoo.yaml").exists() and (into / "IMPORT.md").read_text("utf-8") == "mine\n"
    assert run_cli(["import", DATA / "csv" / "promptfooconfig.yaml", "--into", into, "--force"]).code == 0
    assert (into / "promptfoo.yaml").exists()


def test_a_config_is_told_from_recordings_by_its_keys_whatever_its_name(tmp_path):
    config = tmp_path / "evals.yaml"
    shutil.copy(DATA / "csv" / "promptfooconfig.yaml", config)
    shutil.copy(DATA / "csv" / "tests.csv", tmp_path / "tests.csv")
    result = run_cli(["import", config, "--into", tmp_path / "out"])
    assert result.code == 0, result.err
    assert len(names(tmp_path / "out")) == 4


def test_the_imported_suite_records_live_then_runs_offline(tmp_path, srv):
    into, _ = imported(tmp_path, "csv")
    srv.default = Behaviour.ok("Bonjour! Buenos dias. Ciao.")
    rec = tmp_path / "run.jsonl"
    live, live_report = run_report(into, tmp_path / "live", "--base-url", srv.url, "--model", "m", "--record", rec)
    assert live_report is not None, live.err
    sent = [r.body["messages"][0]["content"] for r in srv.all_requests]
    assert "Translate to German: Thank you" in sent
    assert run_cli(["import", rec, "--into", into]).code == 0
    offline, offline_report = run_report(into, tmp_path / "offline")
    assert offline_report is not None, offline.err
    assert offline_report["run"]["mode"] == "offline"
    labels = {row["id"]: row["label"] for row in offline_report["cases"]}
    assert labels == {row["id"]: row["label"] for row in live_report["cases"]}
    assert labels == {"French-greeting": "right", "Spanish-greeting": "right", "German-thanks": "wrong",
                      "Italian-farewell": "right"}
