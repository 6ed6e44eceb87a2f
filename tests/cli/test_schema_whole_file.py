"""``envelope-ci schema``: by default the schema of a whole fixture file, so an editor accepts every form envelope-ci
reads (one case, a list, ``{cases}``, ``{defaults, cases}``); ``schema case`` is one case."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envelope_ci.sources.files import case_files
from envelope_ci.sources.parse import loads_strict, numbered_lines, parse_yaml_document
from tests.support.suites import EXAMPLES, REPO_ROOT, run_cli, run_module

pytestmark = pytest.mark.usefixtures("clean_env")

PLUGIN = REPO_ROOT / "examples" / "plugin-max-words"


def printed(*which: str, env: dict[str, str] | None = None) -> jsonschema.protocols.Validator:
    """A validator of the schema ``envelope-ci schema [WHICH]`` prints (in a child process when ``env`` is given)."""
    result = run_module(["schema", *which], env=env) if env else run_cli(["schema", *which])
    assert result.code == 0, result.err
    schema = json.loads(result.out)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def documents(path: Path) -> list[Any]:
    """What a fixture file holds, read as envelope-ci reads it (a YAML date stays text): a JSONL file, each line."""
    text = path.read_text("utf-8")
    if path.suffix == ".jsonl":
        return [loads_strict(line) for _, line in numbered_lines(text) if line.strip()]
    if path.suffix == ".json":
        return [loads_strict(text)]
    return [parse_yaml_document(text, path.as_posix()).data]


def refusals(validator: jsonschema.protocols.Validator, root: Path) -> dict[str, list[str]]:
    """Every fixture file under ``root`` (as a run finds them) that the schema refuses, with why."""
    found = {}
    for path in case_files(root, set()):
        errors = [e.message for doc in documents(path) for e in validator.iter_errors(doc)]
        if errors:
            found[path.relative_to(root).as_posix()] = errors
    return found


def test_every_fixture_file_init_writes_is_valid_against_the_printed_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["init", "--no-workflow"]).code == 0
    files = case_files(tmp_path / "evals", set())
    assert len(files) == 3
    assert refusals(printed(), tmp_path / "evals") == {}


@pytest.mark.parametrize("suite", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_every_bundled_example_fixture_is_valid_against_the_printed_schema(suite):
    root = EXAMPLES / suite
    assert case_files(root, set())
    assert refusals(printed(), root) == {}


def test_the_plugin_example_is_valid_against_the_schema_printed_with_its_plugin(tmp_path):
    """Its ``max-words`` type joins the schema through a real entry point: without it the type is refused."""
    info = tmp_path / "envelope_ci_max_words-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: envelope-ci-max-words\nVersion: 0.1.0\n", "utf-8")
    (info / "entry_points.txt").write_text("[envelope_ci.assertions]\nmax-words = envelope_ci_max_words:ASSERTION\n",
                                           "utf-8")
    with_plugin = printed(env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(PLUGIN), str(REPO_ROOT)])})
    assert refusals(with_plugin, PLUGIN / "evals") == {}
    assert list(refusals(printed(), PLUGIN / "evals")) == ["cases.yaml"]


def test_each_form_of_a_fixture_file_is_valid_and_a_typo_is_not():
    validator = printed("file")
    case = {"id": "a", "prompt": "Hi", "completion": "Hello", "assert": [{"type": "contains", "value": "Hello"}]}
    for form in (case, [case, {**case, "id": "b"}], {"cases": [case]},
                 {"defaults": {"prompt": "Hi", "stratum": "easy"}, "cases": [{"id": "a", "completion": "Hello"}]}):
        assert list(validator.iter_errors(form)) == [], form
    for wrong in ({**case, "asert": []}, {**case, "assert": [{"tpye": "contains", "value": "Hello"}]},
                  {"cases": [{"id": "a", "completion": "Hello"}]},  # no prompt, and no defaults to give one
                  {"defaults": {"id": "x"}, "cases": [case]},  # defaults give any key but the id
                  {"defaults": {}, "cases": [case], "tests": []}):
        assert not validator.is_valid(wrong), wrong


def test_schema_case_is_the_schema_of_one_case():
    validator = printed("case")
    assert validator.schema["title"] == "envelope-ci fixture case"
    case = {"id": "a", "prompt": "Hi", "completion": "Hello"}
    assert validator.is_valid(case) and not validator.is_valid([case]) and not validator.is_valid({"cases": [case]})
    assert printed().schema["$defs"]["case"]["properties"] == validator.schema["properties"]
