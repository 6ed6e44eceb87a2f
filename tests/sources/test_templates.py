"""Prompts from the product's files: {{ name }} placeholders, vars, file-level defaults, and the hash that follows the files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envelope_ci.canonical import digest
from envelope_ci.errors import UsageError
from envelope_ci.sources.cases import case_schema, load_cases
from tests.support.suites import make_suite, run_report, write_pins

pytestmark = pytest.mark.usefixtures("clean_env")

SUPPORT = "You are the {{ company }} support assistant.\nAnswer in {{language}}.\n"


def problems_of(root: Path) -> list[str]:
    """Every problem, as printed, with the fixtures directory shown as ``evals``."""
    with pytest.raises(UsageError) as info:
        load_cases(root, set(), shown_root="evals")
    return [str(p) for p in info.value.problems]


def only_problem(root: Path) -> str:
    found = problems_of(root)
    assert len(found) == 1, found
    return found[0]


def by_id(root: Path) -> dict:
    return {c.id: c for c in load_cases(root, set(), shown_root="evals")}


def repo(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    """A repository (it has a .git) holding ``files``, with its fixtures in ``evals/``."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    for rel, content in files.items():
        path = tmp_path / "repo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return tmp_path / "repo" / "evals"


# -- rendering -------------------------------------------------------------------------------

def test_placeholders_are_filled_in_prompt_system_and_messages(tmp_path):
    root = make_suite(tmp_path, [
        {"id": "p", "system": "You help {{company}}.", "prompt": "Order {{ order }}, {{  order  }} again: {{ urgent }} / {{ n }}",
         "vars": {"company": "Northwind", "order": "NW-1", "urgent": True, "n": 2.5}, "completion": "ok"},
        {"id": "m", "vars": {"who": "Ada", "lit": "{{ who }}"}, "completion": "ok", "messages": [
            {"role": "system", "content": "Greet {{ who }}."},
            {"role": "user", "content": [{"type": "text", "text": "I am {{who}}, say {{ lit }}"}, {"type": "image_url", "image_url": {"url": "{{ x }}"}}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        ]},
    ])
    cases = by_id(root)
    assert cases["p"].messages == ({"role": "system", "content": "You help Northwind."},
                                   {"role": "user", "content": "Order NW-1, NW-1 again: true / 2.5"})
    system, user, assistant = cases["m"].messages
    assert system["content"] == "Greet Ada."
    # a value is inserted as written, never scanned again; only text parts are templates
    assert user["content"] == [{"type": "text", "text": "I am Ada, say {{ who }}"}, {"type": "image_url", "image_url": {"url": "{{ x }}"}}]
    assert assistant["content"] is None and assistant["tool_calls"][0]["function"]["name"] == "f"


def test_prompt_files_are_read_and_filled(tmp_path):
    root = repo(tmp_path, {
        "prompts/support.md": SUPPORT,
        "evals/prompts/ask.txt": "Where is order {{ order }}?",
        "evals/cases.yaml": "- id: a\n  system_file: /prompts/support.md\n  prompt_file: prompts/ask.txt\n"
                            "  vars: {company: Northwind, language: French, order: NW-7}\n  completion: ok\n",
    })
    (case,) = load_cases(root, set())
    assert case.messages == ({"role": "system", "content": "You are the Northwind support assistant.\nAnswer in French.\n"},
                             {"role": "user", "content": "Where is order NW-7?"})
    assert set(case.files) == {"/prompts/support.md", "prompts/ask.txt"}


def test_other_template_syntax_is_sent_as_written(tmp_path):
    text = "{{ name | upper }} {% if x %} {{}} {{ 1x }}"
    (case,) = load_cases(make_suite(tmp_path, [{"id": "a", "prompt": text, "completion": "ok"}]), set())
    assert case.messages[-1]["content"] == text


def test_prompt_file_counts_as_the_prompt(tmp_path):
    root = make_suite(tmp_path, [{"id": "a", "prompt_file": "ask.txt", "completion": "ok"}], files={"ask.txt": "Hello"})
    assert load_cases(root, set())[0].messages == ({"role": "user", "content": "Hello"},)
    assert only_problem(make_suite(tmp_path, [{"id": "a", "vars": {}, "completion": "ok"}], name="none")) == \
        "evals/cases.yaml:1: a case needs a 'prompt' or 'messages'"


def test_a_case_without_templates_keeps_its_digest(tmp_path):
    data = {"id": "a", "system": "s", "prompt": "p {{ x }}", "vars": {"x": "1"}, "completion": "ok"}
    plain = {"id": "b", "system": "s", "prompt": "p", "completion": "ok"}
    cases = by_id(make_suite(tmp_path, [data, plain]))
    assert cases["b"].digest == digest(plain) and cases["b"].files == {}
    assert cases["a"].digest == digest(data)  # vars and placeholders are part of the case as written


# -- errors: file, line, field, the variable and the file ---------------------------------------

def test_unknown_and_unused_variables_name_both(tmp_path):
    text = ("- id: a\n  prompt: Hi {{ nme }}, {{ nme }}\n  vars:\n    name: Ada\n  completion: ok\n"
            "- id: b\n  messages:\n    - role: user\n      content: [{type: text, text: '{{ x }}'}]\n  completion: ok\n")
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "evals/cases.yaml:2: prompt: unknown variable 'nme': add it to the vars of case 'a'",
        "evals/cases.yaml:4: vars.name: unused variable 'name': case 'a' has no {{ name }} in its prompt, system, messages or their files",
        "evals/cases.yaml:7: messages.0.content.0.text: unknown variable 'x': add it to the vars of case 'b'",
    ]


def test_unknown_variable_in_a_file_names_the_file_and_its_line(tmp_path):
    root = repo(tmp_path, {
        "prompts/support.md": SUPPORT,
        "evals/cases.yaml": "- id: a\n  prompt: p\n  system_file: /prompts/support.md\n  vars: {company: Northwind}\n  completion: ok\n",
    })
    assert only_problem(root) == ("evals/cases.yaml:3: system_file: unknown variable 'language' "
                                  "({{ language }} in /prompts/support.md:2): add it to the vars of case 'a'")


def test_a_var_used_only_where_it_is_not_sent_is_unused(tmp_path):
    text = "- id: a\n  prompt: '{{ x }}'\n  messages: [{role: user, content: hi}]\n  vars: {x: '1'}\n  completion: ok\n"
    assert only_problem(make_suite(tmp_path, files={"cases.yaml": text})).startswith("evals/cases.yaml:4: vars.x: unused variable 'x'")


@pytest.mark.parametrize("keys,expected", [
    ("  system: s\n  system_file: s.md\n  prompt: p\n", "evals/cases.yaml:3: system_file: give either 'system' or 'system_file', not both"),
    ("  prompt: p\n  prompt_file: s.md\n", "evals/cases.yaml:3: prompt_file: give either 'prompt' or 'prompt_file', not both"),
    ("  messages: [{role: user, content: hi}]\n  system_file: s.md\n", "evals/cases.yaml:3: system_file: give either 'messages' or 'system_file', not both"),
    ("  prompt: p\n  vars: {my-var: x}\n", "evals/cases.yaml:3: vars: 'my-var' is not a variable name: letters, digits and _, not starting with a digit"),
    ("  prompt: p\n  vars: {x: null}\n", "evals/cases.yaml:3: vars.x: None is not a variable's value: a string, number or "
                                         "boolean, a list of them (a matrix: one case per value), or {value: [...]} (a list "
                                         "sent as a list)"),
])
def test_conflicting_and_malformed_keys(tmp_path, keys, expected):
    root = make_suite(tmp_path, files={"cases.yaml": "- id: a\n" + keys + "  completion: ok\n", "s.md": "S"})
    assert only_problem(root) == expected


def test_missing_outside_and_non_utf8_files(tmp_path):
    root = repo(tmp_path, {
        "outside.md": "x",
        "prompts/latin1.md": b"caf\xe9",
        "evals/cases.yaml": ("- id: missing\n  prompt: p\n  system_file: prompts/nope.md\n  completion: ok\n"
                             "- id: outside\n  prompt_file: ../../outside.md\n  completion: ok\n"
                             "- id: latin\n  prompt_file: /prompts/latin1.md\n  completion: ok\n"),
    })
    repo_root = (tmp_path / "repo").resolve().as_posix()
    assert problems_of(root) == [
        f"evals/cases.yaml:3: system_file: prompts/nope.md: file not found (looked at {root.as_posix()}/prompts/nope.md)",
        f"evals/cases.yaml:6: prompt_file: ../../outside.md: outside the repository {repo_root}",
        "evals/cases.yaml:9: prompt_file: /prompts/latin1.md: not UTF-8 text",
    ]


# -- defaults --------------------------------------------------------------------------------

DEFAULTS_YAML = """\
defaults:
  system_file: /prompts/support.md
  vars: {company: Northwind, language: English}
  stratum: easy
  max_tokens: 64
  assert:
    - {type: max-chars, value: 400}
cases:
  - id: first
    prompt: Where is {{ order }}?
    vars: {order: NW-1, language: French}
    assert: [{type: contains, value: NW-1}]
    completion: NW-1 is on its way
  - id: second
    stratum: medium
    system: Plain.
    prompt: Hello
    completion: hi
"""


def test_defaults_apply_merge_and_are_overridden(tmp_path):
    root = repo(tmp_path, {"prompts/support.md": SUPPORT, "evals/cases.yaml": DEFAULTS_YAML})
    cases = by_id(root)
    first, second = cases["first"], cases["second"]
    assert (first.line, second.line) == (9, 14)
    assert first.messages[0]["content"] == "You are the Northwind support assistant.\nAnswer in French.\n"  # vars merge by name
    assert first.stratum == "easy" and first.request == {"max_tokens": 64}
    assert [(e.name, e.value) for e in first.expectations] == [("max-chars", 400), ("contains", "NW-1")]  # defaults first
    # the case's own system replaces the defaults' system_file; the defaults' vars may go unused
    assert second.messages == ({"role": "system", "content": "Plain."}, {"role": "user", "content": "Hello"})
    assert second.stratum == "medium" and second.files == {} and [e.name for e in second.expectations] == ["max-chars"]
    assert set(first.files) == {"/prompts/support.md"}


def test_json_defaults(tmp_path):
    text = json.dumps({"defaults": {"prompt": "Hi {{ who }}", "vars": {"who": "Ada"}, "max_tokens": 8},
                       "cases": [{"id": "a", "completion": "ok"}, {"id": "b", "vars": {"who": "Bo"}, "max_tokens": 9, "completion": "ok"}]}, indent=2)
    cases = by_id(make_suite(tmp_path, files={"cases.json": text}))
    assert cases["a"].messages[-1]["content"] == "Hi Ada" and cases["a"].request == {"max_tokens": 8}
    assert cases["b"].messages[-1]["content"] == "Hi Bo" and cases["b"].request == {"max_tokens": 9}
    assert (cases["a"].line, cases["b"].line) == (11, 15)


def test_problems_in_defaults_point_at_the_defaults_once(tmp_path):
    text = ("defaults:\n  max_tokens: ten\n  prompt: Hi {{ who }}\n  assert:\n    - {type: contains}\n  tempreature: 1\n"
            "cases:\n  - id: a\n    completion: ok\n  - id: b\n    completion: ok\n    assert: [{type: contains, value: 1}]\n")
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "evals/cases.yaml:6: tempreature: unknown key (did you mean 'temperature'?)",
        "evals/cases.yaml:5: assert.0: 'value' is a required property",
        "evals/cases.yaml:2: max_tokens: 'ten' is not of type 'integer'",
        "evals/cases.yaml:12: assert.1.value: 1 is not of type 'string'",
    ]
    json_text = json.dumps({"cases": [{"id": "a", "completion": "ok"}], "defaults": {"prompt": "Hi {{ who }}"}}, indent=2)
    assert only_problem(make_suite(tmp_path, files={"c.json": json_text}, name="j")) == \
        "evals/c.json:8: prompt: unknown variable 'who': add it to the vars of case 'a'"


@pytest.mark.parametrize("text,expected", [
    ("defaults: {id: x}\ncases: [{id: a, prompt: p, completion: ok}]\n", ["evals/cases.yaml:1: defaults.id: defaults cannot give an id: each case names its own"]),
    ("defaults: [1]\ncases: [{id: a, prompt: p, completion: ok}]\n", ["evals/cases.yaml:1: defaults: expected a mapping of case keys, got list"]),
    ("defaults: {}\ncase: []\n", ["evals/cases.yaml:2: case: unknown key: a file with 'defaults' holds only 'defaults' and 'cases'",
                                  "evals/cases.yaml:1: cases: a file with 'defaults' needs a 'cases' list"]),
])
def test_malformed_defaults_wrapper(tmp_path, text, expected):
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == expected


def test_jsonl_has_no_defaults(tmp_path):
    text = '{"defaults": {"prompt": "p"}}\n{"id": "a", "prompt": "p", "completion": "ok"}\n'
    assert "evals/cases.jsonl:1: defaults: unknown key" in problems_of(make_suite(tmp_path, files={"cases.jsonl": text}))


def test_schema_publishes_the_keys():
    properties = case_schema()["properties"]
    assert {"system_file", "prompt_file", "vars"} <= set(properties)
    assert {"required": ["prompt_file"]} in case_schema()["anyOf"]


# -- the prompt lives with the code: editing it is a fixture change ---------------------------

def test_editing_a_prompt_file_fails_fixtures_changed_until_repinned(tmp_path):
    root = repo(tmp_path, {
        "prompts/support.md": SUPPORT,
        "evals/cases.yaml": DEFAULTS_YAML + "  - id: third\n    system_file: /prompts/support.md\n    prompt: Bye\n    completion: bye\n",
        "evals/other.yaml": "- id: other\n  prompt: p\n  completion: ok\n",
        "evals/envelope-ci.yaml": "thin_below: 0\n",
    })
    assert write_pins(root, tmp_path / "pins-out").code == 0
    pinned = json.loads((root / "envelope-pins.json").read_text("utf-8"))
    assert "/prompts/support.md" in pinned["files"]
    assert run_report(root, tmp_path / "same")[0].code == 0

    (tmp_path / "repo" / "prompts" / "support.md").write_text(SUPPORT + "Never promise refunds.\n", "utf-8")
    result, report = run_report(root, tmp_path / "edited")
    assert result.code == 1 and "fixtures_changed" in report["alerts"]
    assert report["fixtures"]["files_changed"] == ["/prompts/support.md"]
    assert report["fixtures"]["modified"] == ["first", "third"]  # not second (its own system) nor other
    message = next(a["message"] for a in report["alert_details"] if a["code"] == "fixtures_changed")
    assert "modified: first, third" in message and "files: /prompts/support.md" in message

    assert write_pins(root, tmp_path / "repin").code == 0
    result, report = run_report(root, tmp_path / "after")
    assert result.code == 0 and report["fixtures"]["changed"] is False

