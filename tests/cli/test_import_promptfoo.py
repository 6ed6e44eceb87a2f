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
    assert "- `providers[0].config.max_tokens`: a provider setting" in notes
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


def import_config(tmp_path: Path, config: dict, *args: str) -> tuple[Path, str]:
    """Import a config written into ``tmp_path/cfg``; the directory it went into and the command's output."""
    folder = tmp_path / "cfg"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "promptfooconfig.yaml").write_text(yaml.safe_dump(config), "utf-8")
    into = tmp_path / "evals"
    result = run_cli(["import", folder / "promptfooconfig.yaml", "--into", into, *args])
    assert result.code == 0, result.err
    return into, result.out


def written(into: Path) -> str:
    return "".join(p.read_text("utf-8") for p in sorted(into.rglob("*")) if p.is_file())


SECRET = "sk-test-SECRET"
KEYED = {"id": "openai:gpt-4o-mini", "config": {"apiKey": SECRET, "headers": {"Authorization": SECRET}}}


def test_no_key_in_the_config_reaches_a_written_file_or_the_dry_run(tmp_path):
    config = {"prompts": ["Say {{ x }}"], "env": {"OPENAI_API_KEY": SECRET},
              "providers": [KEYED, {"id": "bedrock:m", "config": {"apiKey": SECRET}}, {"id": KEYED}],
              "defaultTest": {"options": {"provider": KEYED, "headers": {"X": SECRET}}},
              "tests": [{"vars": {"x": "hi"}, "provider": KEYED, "options": {"provider": "openai:gpt-4o",
                                                                            "apiKey": SECRET},
                         "assert": [{"type": "llm-rubric", "value": "polite", "provider": KEYED},
                                    {"type": "llm-rubric", "value": "kind", "provider": {"id": "x:y", "config": {
                                        "apiKey": SECRET}}},
                                    {"type": "contains", "value": "hi", "provider": KEYED},
                                    {"type": "factuality", "value": "hi", "provider": KEYED}]}]}
    into, _ = import_config(tmp_path, config)
    assert SECRET not in written(into)
    notes = (into / "IMPORT.md").read_text("utf-8")
    assert "- `env`: a value not shown" in notes
    assert "- `providers[0].config.apiKey`: a provider setting" in notes
    _, out = import_config(tmp_path / "dry", config, "--dry-run")
    assert SECRET not in out and "providers[0].config.apiKey" in out


def test_a_name_or_value_from_the_config_never_runs_in_a_printed_command(tmp_path):
    config = {"prompts": ["Say {{ x }}"],
              "providers": [{"id": "openai:chat:m", "config": {"apiKeyEnvar": 'X}"; touch /tmp/pwned; echo "'}},
                            "anthropic:messages:",
                            {"id": "openai:chat:m2", "config": {"apiBaseUrl": "http://h/v1; touch /tmp/pwned"}}],
              "tests": [{"vars": {"x": "hi"}, "assert": [
                  {"type": "llm-rubric", "value": "polite",
                   "provider": {"id": "openai:gpt-4o", "config": {"apiKeyEnvar": "Y; rm -rf ~"}}},
                  {"type": "llm-rubric", "value": "kind", "provider": "openai:chat:"}]}]}
    into, _ = import_config(tmp_path, config)
    notes = (into / "IMPORT.md").read_text("utf-8")
    assert "pwned; echo" not in notes and "rm -rf" not in notes + (into / "envelope-ci.yaml").read_text("utf-8")
    assert "--base-url 'http://h/v1; touch /tmp/pwned' --model m2" in notes
    assert "- `providers[0]`: `openai:chat:m` — not converted: its config.apiKeyEnvar is not the name" in notes
    assert "- `providers[1]`: `anthropic:messages:` — not converted: its model is not what" in notes
    assert "- `tests[0].assert[1].provider`: a value not shown (it may hold a key) — not converted: the judge" in notes
    assert run_cli(["hash", into]).code == 0


def test_a_file_reference_outside_the_config_folder_is_refused(tmp_path):
    (tmp_path / "outside.txt").write_text("OUTSIDE-TEXT {{ x }}", "utf-8")
    (tmp_path / "outside.csv").write_text("x\nOUTSIDE-TEXT\n", "utf-8")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "link.txt").symlink_to(tmp_path / "outside.txt")
    (tmp_path / "cfg" / "link.csv").symlink_to(tmp_path / "outside.csv")
    into, _ = import_config(tmp_path, {
        "prompts": [f"file://{tmp_path / 'outside.txt'}", "file://../outside.txt", "file://link.txt", "Say {{ x }}"],
        "tests": ["file://../outside.csv", "file://link.csv", f"file://{tmp_path / 'outside.csv'}"]})
    assert "OUTSIDE-TEXT" not in written(into)
    notes = (into / "IMPORT.md").read_text("utf-8")
    for where in ("prompts[0]", "prompts[1]", "prompts[2]", "tests[0]", "tests[1]", "tests[2]"):
        assert f"- `{where}`: " in notes
    assert notes.count("is outside the config's folder") == 6


def test_every_key_of_a_prompt_object_but_its_text_is_listed(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "p.txt").write_text("Hi {{ x }}", "utf-8")
    into, _ = import_config(tmp_path, {
        "prompts": [{"raw": "Say {{ x }}", "label": "short", "config": {"apiKey": SECRET}},
                    {"id": "file://p.txt", "label": "file", "function": "f"}],
        "tests": [{"vars": {"x": "hi"}}]})
    notes = (into / "IMPORT.md").read_text("utf-8")
    for item in ("- `prompts[0].label`: `short` — not converted", "- `prompts[0].config`: a value not shown",
                 "- `prompts[1].label`: `file` — not converted", "- `prompts[1].function`: `f` — not converted"):
        assert item in notes
    assert SECRET not in written(into)


def test_a_csv_expected_cell_takes_only_promptfoos_types_as_prefixes_and_extra_cells_are_listed(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "t.csv").write_text(
        "x,__expected1,__expected2,__expected3,__description\n"
        "a,answer: Paris,https://x.example,not-icontains:bar,one\n"
        "b,contains:foo,similar(0.9):hello,equals:b,two,EXTRA-CELL\n", "utf-8")
    into, _ = import_config(tmp_path, {"prompts": ["Say {{ x }}"], "tests": ["file://t.csv"]})
    cases = {c["id"]: c for c in fixture(into)["cases"]}
    assert cases["one"]["assert"] == [{"type": "equals", "value": "answer: Paris"},
                                      {"type": "equals", "value": "https://x.example"},
                                      {"type": "not-icontains", "value": "bar"}]
    assert cases["two"]["assert"] == [{"type": "contains", "value": "foo"},
                                      {"type": "similar", "value": "hello", "threshold": 0.9},
                                      {"type": "equals", "value": "b"}]
    notes = (into / "IMPORT.md").read_text("utf-8")
    assert '- `t.csv[2]`: `["EXTRA-CELL"]` — not converted: cells past the header row' in notes


@pytest.mark.parametrize("name", ["prompt.jsonl", "prompt.recorded.jsonl"])
def test_a_prompt_file_the_suite_would_read_as_cases_is_copied_under_another_name(tmp_path, name):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / name).write_text("Say {{ x }}\n", "utf-8")
    into, _ = import_config(tmp_path, {"prompts": [f"file://{name}"], "tests": [{"vars": {"x": "hi"}}]})
    assert (into / "prompts" / f"{name}.txt").read_text("utf-8") == "Say {{ x }}\n"
    assert fixture(into)["defaults"]["prompt_file"] == f"prompts/{name}.txt"
    assert f"converted with a change: copied as `prompts/{name}.txt`" in (into / "IMPORT.md").read_text("utf-8")
    assert run_cli(["hash", into]).code == 0


def test_config_text_cannot_break_out_of_its_place_in_import_notes(tmp_path):
    into, _ = import_config(tmp_path, {
        "prompts": ["Say {{ x }}"], "scenarios": "a ` b\n\n# Heading\n```",
        "tests": [{"vars": {"x": "hi", "y`\n# V": "1"}, "description": "d", "weird`\n\n# K": "v"}]})
    notes = (into / "IMPORT.md").read_text("utf-8")
    listed = notes.split("## Not converted", 1)[1].splitlines()[2:]
    assert listed and all(line.startswith("- ") for line in listed if line)
    assert "- `scenarios`: ```` a ` b # Heading ``` ```` — not converted" in notes
    assert not any(line.startswith(("#", "```")) for line in listed)
