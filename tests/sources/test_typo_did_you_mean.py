"""A typo is one problem, on its own line, with a did-you-mean; the settings' problems come with the fixtures'."""
from __future__ import annotations

import pytest

from envelope_ci.errors import UsageError
from envelope_ci.sources.cases import load_cases
from tests.support.suites import make_suite, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

HEAD = "- id: a\n  prompt: hi\n  completion: hello\n"


def problems(tmp_path, text: str, name: str = "cases.yaml") -> list[str]:
    suite = make_suite(tmp_path, files={name: text}, name="evals")
    with pytest.raises(UsageError) as caught:
        load_cases(suite, set())
    return [str(p).removeprefix(suite.parent.as_posix() + "/") for p in caught.value.problems]


def test_a_typo_in_an_assertion_is_one_problem_on_the_entrys_line(tmp_path):
    text = HEAD + "  assert:\n    - {type: contains, value: hello}\n    - {tpye: contains, value: hello}\n" \
                  "    - type: contians\n      value: hello\n"
    assert problems(tmp_path, text) == [
        "evals/cases.yaml:6: assert.1.tpye: unknown key (did you mean 'type'?)",
        "evals/cases.yaml:7: assert.2.type: 'contians' is not one of the assertion types (did you mean 'contains'?)",
    ]


@pytest.mark.parametrize(("entry", "expected"), [
    ("{type: contains, valeu: hello}", "assert.0.valeu: unknown key (did you mean 'value'?)"),
    ("{type: llm-rubric, value: polite, endpiont: judge}", "assert.0.endpiont: unknown key (did you mean 'endpoint'?)"),
    ("{type: not-max-chars, value: 3}",
     "assert.0.type: 'not-max-chars' is not one of the assertion types: 'max-chars' has no not- form"),
])
def test_a_mistyped_key_of_an_entry_is_not_also_its_missing_key(tmp_path, entry, expected):
    assert problems(tmp_path, HEAD + f"  assert:\n    - {entry}\n") == [f"evals/cases.yaml:5: {expected}"]


def test_a_type_like_no_other_lists_the_types(tmp_path):
    [problem] = problems(tmp_path, HEAD + "  assert:\n    - {type: zzzz, value: 1}\n")
    assert problem.startswith("evals/cases.yaml:5: assert.0.type: 'zzzz' is not one of the assertion types: contains, ")
    assert "did you mean" not in problem and "llm-rubric" in problem


def test_a_mistyped_prompt_is_not_also_a_missing_prompt(tmp_path):
    assert problems(tmp_path, "- id: a\n  promt: hi\n  completion: hello\n") == [
        "evals/cases.yaml:2: promt: unknown key (did you mean 'prompt'?)"]
    assert problems(tmp_path / "x", "- id: a\n  zzz: hi\n  completion: hello\n") == [
        "evals/cases.yaml:2: zzz: unknown key", "evals/cases.yaml:1: a case needs a 'prompt' or 'messages'"]


def test_a_value_that_is_none_of_its_choices_has_a_did_you_mean(tmp_path):
    assert problems(tmp_path, HEAD + "  stratum: medum\n") == [
        "evals/cases.yaml:4: stratum: 'medum' is not one of ['easy', 'medium', 'stretch'] (did you mean 'medium'?)"]


def test_entries_keep_their_own_lines_when_the_defaults_give_entries_too(tmp_path):
    text = ("defaults:\n  prompt: hi\n  assert:\n    - {type: contains, value: a}\n    - {tpye: contains, value: b}\n"
            "cases:\n  - id: a\n    completion: ab\n    assert:\n      - {type: icontains, value: a}\n"
            "      - {type: contains, valeu: c}\n  - id: b\n    completion: ab\n")
    assert problems(tmp_path, text) == [
        "evals/cases.yaml:5: assert.1.tpye: unknown key (did you mean 'type'?)",  # once, at the defaults' entry
        "evals/cases.yaml:11: assert.3.valeu: unknown key (did you mean 'value'?)",  # after the defaults' two
    ]


def test_settings_problems_are_reported_with_the_fixtures_problems(tmp_path):
    suite = make_suite(tmp_path, files={"cases.yaml": HEAD + "  assert:\n    - {tpye: contains, value: hello}\n"},
                       config="size_slack: 1.1\nfingerprint_change: fial\n", name="evals")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and not (tmp_path / "out").exists()
    assert result.err_lines == [
        f"error: {suite.as_posix()}/cases.yaml:5: assert.0.tpye: unknown key (did you mean 'type'?)",
        f"error: {suite.as_posix()}/envelope-ci.yaml:2: fingerprint_change: 'fial' is not one of ['fail', 'warn'] "
        "(did you mean 'fail'?)",
    ]
