"""Held-out checks of ``envelope-ci import promptfooconfig.yaml``: configs written the way promptfoo's own
documentation and examples write them (each cites its page or file in promptfoo/promptfoo), imported into a suite
that loads, with every convertible assertion present and every other item listed in IMPORT.md with why."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from envelope_ci.sources.cases import load_cases
from tests.cli.test_import_promptfoo import fixture, names, written
from tests.support.fake_openai import Behaviour
from tests.support.suites import run_cli, run_report

pytestmark = pytest.mark.usefixtures("clean_env")


def import_text(tmp_path: Path, config: str, files: dict[str, str] | None = None, *args: str) -> tuple[Path, str]:
    """Write ``config`` (promptfooconfig.yaml, as a person writes it) and ``files`` beside it, import it; the
    directory written and the command's output. The written suite must load (``envelope-ci hash``)."""
    folder = tmp_path / "cfg"
    for name, text in {"promptfooconfig.yaml": config, **(files or {})}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text), "utf-8")
    into = tmp_path / "evals"
    result = run_cli(["import", folder / "promptfooconfig.yaml", "--into", into, *args])
    assert result.code == 0, result.err
    if "--dry-run" not in args:
        loads = run_cli(["hash", into])
        assert loads.code == 0, loads.err
    return into, result.out


def notes_of(into: Path) -> str:
    return (into / "IMPORT.md").read_text("utf-8")


def listed(into: Path) -> list[str]:
    """The lines of IMPORT.md's "Not converted" list."""
    return [line for line in notes_of(into).split("## Not converted", 1)[1].splitlines()[1:] if line.startswith("- ")]


def cases_of(into: Path, name: str = "promptfoo.yaml") -> dict[str, dict]:
    data = yaml.safe_load((into / name).read_text("utf-8"))
    return {c["id"]: c for c in data["cases"]}


# Modelled on site/docs/configuration/expected-outputs/deterministic.md (contains with a number, contains-all,
# regex, is-json with a schema, cost and latency thresholds) and expected-outputs/index.md ("Assertion
# properties", "Grouping assertions via Assertion Sets", "Weighted assertions", "Defining named metrics").
ASSERTS = """\
    description: Weather lookup as JSON
    prompts:
      - 'Answer as JSON with latitude and longitude: {{question}}'
    providers:
      - openai:chat:gpt-4o-mini
    tests:
      - description: Paris coordinates
        vars:
          question: Where is Paris?
        assert:
          - type: equals
            value: '{"latitude": 48.85, "longitude": 2.35}'
          - type: contains
            value: 48
          - type: icontains
            value: LATITUDE
          - type: contains-any
            value: ['48.8', '48.9']
          - type: contains-all
            value: [latitude, longitude]
          - type: icontains-any
            value: [Latitude]
          - type: icontains-all
            value: [LATITUDE, LONGITUDE]
          - type: starts-with
            value: '{'
          - type: regex
            value: "\\\\d{2}\\\\.\\\\d+"
          - type: is-json
            value:
              required: [latitude, longitude]
              type: object
              properties:
                latitude: {type: number, minimum: -90, maximum: 90}
                longitude: {type: number, minimum: -180, maximum: 180}
          - type: not-contains
            value: sorry
          - type: not-icontains-any
            value: [error, unknown]
          - type: not-regex
            value: "[Ss]orry"
          - type: not-starts-with
            value: '```'
          - type: similar
            value: The latitude is 48.85 and the longitude 2.35.
            threshold: 0.75
          - type: not-similar
            value: I cannot help with that.
            threshold: 0.9
          - type: cost
            threshold: 0.001
          - type: latency
            threshold: 2000
          - type: llm-rubric
            value: Gives coordinates in decimal degrees
          - type: contains-json
          - type: not-llm-rubric
            value: Mentions the weather
          - type: javascript
            value: JSON.parse(output).latitude > 48
          - type: python
            value: json.loads(output)['longitude'] < 3
          - type: assert-set
            threshold: 0.5
            assert:
              - type: contains
                value: '48.85'
              - type: contains
                value: '2.35'
          - type: levenshtein
            value: '{"latitude": 48.85}'
            threshold: 5
          - type: contains
            value: latitude
            metric: Consistency
            weight: 2
          - type: icontains
            value: paris
            weight: 0
          - type: equals
            value: {latitude: 48.85, longitude: 2.35}
          - type: contains
            value: '48'
            transform: JSON.parse(output).latitude.toString()
          - type: regex
            value: longitude
            threshold: 0.8
"""


def test_every_assertion_type_envelope_ci_shares_is_converted_and_the_rest_listed_with_why(tmp_path):
    into, out = import_text(tmp_path, ASSERTS)
    assert "converted 1 case(s)" in out
    case = cases_of(into)["Paris-coordinates"]
    by_type = [(e["type"], e.get("value"), e.get("threshold")) for e in case["assert"]]
    assert by_type == [
        ("equals", '{"latitude": 48.85, "longitude": 2.35}', None), ("contains", "48", None),
        ("icontains", "LATITUDE", None), ("contains-any", ["48.8", "48.9"], None),
        ("contains-all", ["latitude", "longitude"], None), ("icontains-any", ["Latitude"], None),
        ("icontains-all", ["LATITUDE", "LONGITUDE"], None), ("starts-with", "{", None),
        ("regex", "\\d{2}\\.\\d+", None), ("is-json", case["assert"][9]["value"], None),
        ("not-contains", "sorry", None), ("not-icontains-any", ["error", "unknown"], None),
        ("not-regex", "[Ss]orry", None), ("not-starts-with", "```", None),
        ("similar", "The latitude is 48.85 and the longitude 2.35.", 0.75),
        ("not-similar", "I cannot help with that.", 0.9), ("cost", None, 0.001), ("latency", None, 2000),
        ("llm-rubric", "Gives coordinates in decimal degrees", None),
        ("contains", "latitude", None), ("regex", "longitude", None)]
    assert case["assert"][9]["value"]["required"] == ["latitude", "longitude"]
    assert case["assert"][18]["endpoint"] == "judge"  # promptfoo's default grader, openai:gpt-4o
    assert names(into)["Paris-coordinates"] == [t for t, _, _ in by_type]
    items = listed(into)
    for where, why in (("assert[19]`: `contains-json`", "no assertion of this type"),
                       ("assert[20]`: `not-llm-rubric`", "llm-rubric has no negation"),
                       ("assert[21]`: `javascript`", "never runs code"),
                       ("assert[22]`: `python`", "envelope-ci's own `python` grader"),
                       ("assert[23]`: `assert-set`", "no assertion of this type"),
                       ("assert[24]`: `levenshtein`", "no assertion of this type"),
                       ("assert[25].metric`: `Consistency`", "a name in promptfoo's report only"),
                       ("assert[25].weight`: `2`", "only weighs promptfoo's score"),
                       ("assert[26]`: `icontains`", "weight 0"),
                       ("assert[27]`: `equals`", "not of type 'string'"),
                       ("assert[28]`: `contains`", "transform changes what is checked"),
                       ("assert[29].threshold`: `0.8`", "regex is pass or fail")):
        assert any(f"`tests[0].{where}" in line and why in line for line in items), (where, items)
    assert len(items) == 12


# Modelled on site/docs/configuration/expected-outputs/deterministic.md, "Cost": "To record the provider's cost in
# USD without a pass/fail limit, omit `threshold` and set a named `metric`"; src/assertions/latency.ts takes a
# latency without a threshold the same way (a named metric that always passes).
def test_a_latency_or_cost_without_a_threshold_is_listed_and_the_suite_still_loads(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['Summarize: {{article}}']
        providers: [openai:gpt-4o-mini]
        defaultTest:
          assert:
            - type: cost
              metric: inference_cost
            - type: latency
              metric: latency_ms
            - type: latency
              threshold: 3000
        tests:
          - vars: {article: The council met on Tuesday.}
            assert:
              - type: icontains
                value: council
        """)
    assert fixture(into)["defaults"]["assert"] == [{"type": "latency", "threshold": 3000}]
    assert names(into) == {"test-1": ["latency", "icontains"]}
    items = listed(into)
    for where in ("defaultTest.assert[0]`: `cost`", "defaultTest.assert[1]`: `latency`"):
        assert any(where in line and "give the budget" in line for line in items), (where, items)


# Modelled on examples/prompt-labels/promptfooconfig.yaml: prompts as objects {id: file://..., label}, providers
# with a label and the prompts they run, and a select-best assertion.
def test_prompt_objects_with_labels_become_one_fixture_file_each_and_their_labels_are_listed(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts:
          - id: file://prompts1.txt
            label: content_generation
          - id: file://prompts2.txt
            label: knowledge_base_query
        providers:
          - id: openai:gpt-4.1
            label: 4o
            prompts:
              - content_generation
          - id: openai:gpt-4.1-mini
            label: '4.1-mini'
            prompts:
              - knowledge_base_query
        tests:
          - vars:
              topic: machine learning trends
            assert:
              - type: select-best
                value: Choose the most comprehensive overview.
              - type: icontains
                value: learning
        """, {"prompts1.txt": "Write a short article about {{topic}}.\n",
              "prompts2.txt": "Answer from the knowledge base: what is {{topic}}?\n"})
    first, second = (yaml.safe_load((into / f"promptfoo-p{n}.yaml").read_text("utf-8")) for n in (1, 2))
    assert first["defaults"] == {"prompt_file": "prompts/prompts1.txt"}
    assert second["defaults"] == {"prompt_file": "prompts/prompts2.txt"}
    assert (into / "prompts" / "prompts2.txt").read_text("utf-8").startswith("Answer from the knowledge base")
    assert names(into) == {"test-1-p1": ["icontains"], "test-1-p2": ["icontains"]}
    items = "\n".join(listed(into))
    for item in ("- `prompts[0].label`: `content_generation` — not converted",
                 "- `prompts[1].label`: `knowledge_base_query` — not converted",
                 "- `providers[0].label`: `4o` — not converted", "- `providers[1].prompts`: ",
                 "- `tests[0].assert[0]`: `select-best` — not converted"):
        assert item in items
    assert "--model gpt-4.1\n" in notes_of(into) and "--model gpt-4.1-mini\n" in notes_of(into)


# Modelled on site/docs/configuration/reference.md, its "Example" (`prompts: [prompt1.txt, prompt2.txt]`,
# `tests: tests.csv`, no file:// prefix) and site/docs/configuration/guide.md; promptfoo reads such strings as
# files (src/prompts/utils.ts `maybeFilePath`, src/util/testCaseReader.ts `readTests`).
def test_prompt_and_test_paths_written_without_file_prefix_are_read_as_the_files(tmp_path, srv):
    (tmp_path / "outside.txt").write_text("OUTSIDE-TEXT {{input}}", "utf-8")
    (tmp_path / "outside.csv").write_text("input\nOUTSIDE-TEXT\n", "utf-8")
    into, _ = import_text(tmp_path, """\
        prompts:
          - prompt1.txt
          - prompts/prompt2.txt
          - ../outside.txt
        providers:
          - openai:gpt-5
        tests:
          - tests.csv
          - ../outside.csv
        """, {"prompt1.txt": "Convert this English to {{language}}: {{input}}\n",
              "prompts/prompt2.txt": "Translate to {{language}}: {{input}}\n",
              "tests.csv": "language,input,__expected\nFrench,Hello world,icontains: bonjour\n"})
    first, second = (yaml.safe_load((into / f"promptfoo-p{n}.yaml").read_text("utf-8")) for n in (1, 2))
    assert first["defaults"] == {"prompt_file": "prompts/prompt1.txt"}
    assert second["defaults"] == {"prompt_file": "prompts/prompt2.txt"}
    assert names(into) == {"test-1-p1": ["icontains"], "test-1-p2": ["icontains"]}
    assert "OUTSIDE-TEXT" not in written(into)
    assert [line.split(":", 1)[0] for line in listed(into)] == ["- `prompts[2]`", "- `tests[1]`"]
    assert all("is outside the config's folder" in line for line in listed(into))
    srv.default = Behaviour.ok("Bonjour le monde")
    live, report = run_report(into, tmp_path / "live", "--base-url", srv.url, "--model", "m")
    assert report is not None, live.err
    sent = sorted(r.body["messages"][0]["content"] for r in srv.all_requests)
    assert sent == ["Convert this English to French: Hello world\n", "Translate to French: Hello world\n"]
    assert {row["label"] for row in report["cases"]} == {"right"}


# Modelled on src/prompts/utils.ts `normalizeInput`: the legacy prompts map `{'prompts.txt': 'label', ...}` (its
# keys are the prompts, its values their labels).
def test_the_legacy_prompts_map_reads_each_key_as_a_prompt_and_lists_its_label(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts:
          file://short.txt: short
          'Answer in one word: {{question}}': one-word
        providers: [openai:gpt-4o-mini]
        tests:
          - vars:
              question: What colour is the sky?
            assert:
              - type: icontains
                value: blue
        """, {"short.txt": "Answer briefly: {{question}}\n"})
    first, second = (yaml.safe_load((into / f"promptfoo-p{n}.yaml").read_text("utf-8")) for n in (1, 2))
    assert first["defaults"] == {"prompt_file": "prompts/short.txt"}
    assert second["defaults"] == {"prompt": "Answer in one word: {{question}}"}
    assert names(into) == {"test-1-p1": ["icontains"], "test-1-p2": ["icontains"]}
    items = "\n".join(listed(into))
    assert "- `prompts.file://short.txt.label`: `short` — not converted" in items
    assert "`one-word` — not converted" in items
    assert "null" not in items


# Modelled on site/docs/configuration/prompts.md ("File-Based Prompts", globs `file://prompts/*.txt`, the
# conditional `{% if premium %}`) and site/docs/configuration/chat.md (a .json chat prompt with `{{ var }}`).
def test_a_chat_file_converts_and_a_glob_or_a_conditional_is_listed_never_silently_wrong(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts:
          - file://prompts/chat.json
          - file://prompts/*.txt
          - '{% if premium %}Priority support: {% endif %}{{issue}}'
        providers: [openai:gpt-4o-mini]
        tests:
          - description: Login trouble
            vars:
              company: Acme
              issue: I cannot log in
            assert:
              - type: icontains
                value: password
        """, {"prompts/chat.json": '[\n  {"role": "system", "content": "You support {{ company }} customers."},\n'
                                   '  {"role": "user", "content": "{{ issue }}"}\n]\n',
              "prompts/a.txt": "A {{issue}}", "prompts/b.txt": "B {{issue}}"})
    chat = yaml.safe_load((into / "promptfoo-p1.yaml").read_text("utf-8"))
    assert chat["defaults"]["messages"][0] == {"role": "system", "content": "You support {{ company }} customers."}
    loaded = {c.id: c for c in load_cases(into, set())}
    assert loaded["Login-trouble-p1"].messages[0]["content"] == "You support Acme customers."
    assert not (into / "prompts" / "a.txt").exists()
    items = "\n".join(listed(into))
    assert "- `prompts[1]`: `file://prompts/*.txt` — not converted: a glob" in items
    assert "- `prompts[2]`: `{% if premium %}` — not converted: a Nunjucks expression" in items
    assert "- `prompts[2]`: `{% endif %}` — not converted: a Nunjucks expression" in items
    assert "- `tests[0].vars.company`: a variable the prompt does not use" in items  # the third prompt's case


# Modelled on site/docs/providers/openai.md (`openai:chat:M`, config temperature, max_tokens, apiBaseUrl,
# apiKeyEnvar), site/docs/providers/anthropic.md (`anthropic:messages:M`) and site/docs/configuration/reference.md
# (providers as strings or ProviderOptions with id, label, config); vertex, bedrock and http have no equivalent.
PROVIDERS = """\
    prompts: ['{{question}}']
    providers:
      - openai:chat:gpt-4o-mini
      - id: openai:gpt-4o
        label: gpt-4o-cold
        config:
          temperature: 0
          max_tokens: 256
      - id: anthropic:messages:claude-3-5-sonnet-20241022
        config:
          temperature: 0.2
          max_tokens: 1024
      - id: openai:chat:llama3.1
        config:
          apiBaseUrl: http://localhost:11434/v1
          apiKeyEnvar: OLLAMA_API_KEY
      - vertex:gemini-1.5-pro
      - id: bedrock:anthropic.claude-3-haiku-20240307-v1:0
        config:
          region: us-east-1
      - id: http
        config:
          url: https://example.com/api/chat
    tests:
      - vars:
          question: What is 2 + 2?
        assert:
          - type: contains
            value: 4
    """


def test_providers_as_strings_and_objects_become_run_commands_and_the_others_are_listed(tmp_path):
    into, _ = import_text(tmp_path, PROVIDERS)
    notes = notes_of(into)
    run = f"envelope-ci run {into.as_posix()} "
    for command in ('EVAL_API_KEY="$OPENAI_API_KEY" ' + run + "--base-url https://api.openai.com/v1 --model "
                    "gpt-4o-mini",
                    'EVAL_API_KEY="$OPENAI_API_KEY" ' + run + "--base-url https://api.openai.com/v1 --model gpt-4o "
                    "--temperature 0",
                    'EVAL_API_KEY="$ANTHROPIC_API_KEY" ' + run + "--base-url https://api.anthropic.com --model "
                    "claude-3-5-sonnet-20241022 --provider anthropic-messages --temperature 0.2",
                    'EVAL_API_KEY="$OLLAMA_API_KEY" ' + run + "--base-url http://localhost:11434/v1 --model llama3.1"):
        assert command + "\n" in notes
    items = "\n".join(listed(into))
    for item in ("- `providers[1].label`: `gpt-4o-cold` — not converted",
                 "- `providers[1].config.max_tokens`: a provider setting — not converted",
                 "- `providers[2].config.max_tokens`: a provider setting — not converted",
                 "- `providers[4]`: `vertex:gemini-1.5-pro` — not converted: has no equivalent",
                 "- `providers[5]`: `bedrock:anthropic.claude-3-haiku-20240307-v1:0` — not converted",
                 "- `providers[6]`: `http` — not converted: has no equivalent"):
        assert item in items
    assert "localhost:11434" not in (into / "envelope-ci.yaml").read_text("utf-8")
    assert names(into) == {"test-1": ["contains"]}


SECRETS = ("sk-proj-ENVKEY", "sk-ant-ENVKEY", "sk-proj-CONFIGKEY", "sk-ant-CONFIGKEY", "AKIA-CONFIGKEY",
           "Bearer HEADERKEY", "sk-proj-GRADERKEY")


# Modelled on site/docs/configuration/reference.md (`env`: "Can be used to set API keys"), site/docs/providers/
# openai.md and anthropic.md (`config.apiKey`), site/docs/providers/http.md (`headers`) and site/docs/configuration/
# expected-outputs/index.md ("Overriding the LLM grader" with a provider object).
def test_no_api_key_from_env_or_a_provider_config_reaches_a_written_file_or_stdout(tmp_path):
    config = """\
        env:
          OPENAI_API_KEY: sk-proj-ENVKEY
          ANTHROPIC_API_KEY: sk-ant-ENVKEY
        prompts: ['{{question}}']
        providers:
          - id: openai:gpt-4o-mini
            config:
              apiKey: sk-proj-CONFIGKEY
          - id: anthropic:messages:claude-3-5-haiku-20241022
            config:
              apiKey: sk-ant-CONFIGKEY
          - id: bedrock:anthropic.claude-3-haiku-20240307-v1:0
            config:
              accessKeyId: AKIA-CONFIGKEY
          - id: http
            config:
              url: https://example.com/chat
              headers:
                Authorization: Bearer HEADERKEY
        defaultTest:
          options:
            provider:
              id: openai:gpt-4o
              config:
                apiKey: sk-proj-GRADERKEY
        tests:
          - vars: {question: Hi}
            assert:
              - type: llm-rubric
                value: Is friendly
        """
    into, out = import_text(tmp_path, config)
    _, dry = import_text(tmp_path / "dry", config, None, "--dry-run")
    seen = written(into) + out + dry
    assert not [s for s in SECRETS if s in seen]
    items = "\n".join(listed(into))
    assert "- `env`: a value not shown (it may hold a key)" in items
    assert "- `providers[0].config.apiKey`: a provider setting — not converted: a key written" in items
    assert "- `providers[1].config.apiKey`: a provider setting" in items
    assert "- `providers[2]`: `bedrock:" in items and "- `providers[3]`: `http`" in items
    assert yaml.safe_load((into / "envelope-ci.yaml").read_text("utf-8"))["endpoints"]["judge"] == {
        "base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY", "model": "gpt-4o",
        "provider": "openai-chat"}


# Modelled on site/docs/configuration/test-cases.md, "External Test Files" (a list of `file://` test files and a
# glob), "JSON/JSONL Format" and "Dynamic Test Generation" ("With Configuration": `path: file://...py:fn`,
# `config`); src/util/testCaseReader.ts reads a file holding one test as a list of it.
def test_tests_from_files_are_read_and_a_glob_or_a_generator_is_listed_never_made_a_case(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['Which country is {{city}} in?']
        providers: [openai:gpt-4o-mini]
        tests:
          - file://basic_tests.yaml
          - file://more_tests.jsonl
          - file://one_test.json
          - file://edge_cases/*.yaml
          - path: file://generate_tests.py:create_tests
            config:
              dataset: validation
              sample_size: 100
        """, {"basic_tests.yaml": """\
                - description: Paris
                  vars: {city: Paris}
                  assert:
                    - type: icontains
                      value: france
                - vars: {city: Rome}
                  assert:
                    - type: icontains
                      value: italy
                """,
              "more_tests.jsonl": '{"vars": {"city": "Berlin"}, "assert": [{"type": "icontains", '
                                  '"value": "germany"}]}\n',
              "one_test.json": '{"description": "One", "vars": {"city": "Oslo"}, "assert": [{"type": "contains", '
                               '"value": "Norway"}]}',
              "edge_cases/empty.yaml": "- vars: {city: ''}\n",
              "generate_tests.py": "def create_tests(config):\n    return []\n"})
    assert names(into) == {"Paris": ["icontains"], "test-2": ["icontains"], "test-3": ["icontains"],
                           "One": ["contains"]}
    items = "\n".join(listed(into))
    assert "- `tests[3]`: `file://edge_cases/*.yaml` — not converted: tests made by code, a glob" in items
    assert "- `tests[4]`: a value not shown (it may hold a key) — not converted: tests made by code" in items
    assert len(listed(into)) == 2


# Modelled on site/docs/configuration/test-cases.md, "CSV with Assertions" and "Special CSV Columns" (`__expected`,
# `__expected1`..., `__description`, `__prefix`, `__metric`, `__threshold`, `__metadata:*`) and src/csv.ts
# `assertionFromString` (`similar(0.8):`, `grade:`, `not-` forms, no prefix meaning `equals`).
def test_a_csv_with_numbered_expected_columns_and_special_columns_converts_each_cell_as_promptfoo_reads_it(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['{{question}}']
        providers: [openai:gpt-4o-mini]
        tests: file://test_cases.csv
        """, {"test_cases.csv": (
        "question,__expected1,__expected2,__expected3,__description,__prefix,__metric,__threshold,"
        "__metadata:category\n"
        '"What is 2+2?","equals: 4","not-contains: five","javascript: output.length < 10",Basic math,'
        '"You must answer: ",accuracy,0.8,math\n'
        '"What is the capital of France?",Paris,"similar(0.85):Paris is the capital","grade:names a city",'
        'Capital,,,,geography\n'
        '"Name two primary colours","icontains-all: red,blue",,,Colours,,,,art\n')})
    cases = cases_of(into)
    assert cases["Basic-math"]["assert"] == [{"type": "equals", "value": "4"},
                                             {"type": "not-contains", "value": "five"}]
    assert cases["Capital"]["assert"] == [
        {"type": "equals", "value": "Paris"}, {"type": "similar", "value": "Paris is the capital", "threshold": 0.85},
        {"type": "llm-rubric", "value": "names a city", "endpoint": "judge"}]
    assert cases["Colours"]["assert"] == [{"type": "icontains-all", "value": ["red", "blue"]}]
    assert names(into) == {"Basic-math": ["equals", "not-contains"],
                           "Capital": ["equals", "similar", "llm-rubric"], "Colours": ["icontains-all"]}
    items = "\n".join(listed(into))
    for item in ("- `test_cases.csv[1].assert[2]`: `javascript` — not converted: runs code",
                 "- `test_cases.csv[1].__prefix`: `You must answer:` — not converted",
                 "- `test_cases.csv[1].__metric`: `accuracy` — not converted",
                 "- `test_cases.csv[1].__threshold`: `0.8` — not converted",
                 "- `test_cases.csv[3].__metadata:category`: `art` — not converted"):
        assert item in items


# Modelled on site/docs/configuration/reference.md, "Test Case": "If `vars` is a plain string, it will be treated
# as a YAML filepath to load a var mapping from" (src/util/testCaseReader.ts `loadTestWithVars`).
def test_vars_read_from_a_file_are_listed_with_their_test_never_dropped(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['Reply to {{customer}} about {{topic}}']
        providers: [openai:gpt-4o-mini]
        defaultTest:
          vars: file://defaults.yaml
        tests:
          - description: From a vars file
            vars: file://vars/refund.yaml
            assert:
              - type: icontains
                value: refund
          - description: From two vars files
            vars: [file://vars/refund.yaml, file://vars/extra.yaml]
          - description: Inline
            vars: {customer: Ada, topic: shipping}
        """, {"vars/refund.yaml": "customer: Ada\ntopic: refund\n", "vars/extra.yaml": "topic: returns\n",
              "defaults.yaml": "customer: Grace\n"})
    assert names(into) == {"Inline": []}
    items = "\n".join(listed(into))
    assert "- `tests[0].vars`: `file://vars/refund.yaml` — not converted, nor is its test" in items
    assert "- `tests[1].vars`: " in items
    assert "- `defaultTest.vars`: `file://defaults.yaml` — not converted" in items
    assert "sends it as empty text" not in items


# Modelled on site/docs/configuration/test-cases.md ("Test Structure", "Loading Media Files": `file://` vars) and
# reference.md ("vars: Record<string, string | string[] | object | any>"); a list var is promptfoo's matrix.
def test_list_vars_become_a_matrix_and_a_test_with_an_object_or_file_var_is_listed(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['Translate "{{text}}" into {{language}}']
        providers: [openai:gpt-4o-mini]
        tests:
          - description: Greeting
            vars:
              text: Good morning
              language: [French, German, Spanish]
            assert:
              - type: not-icontains
                value: good morning
          - description: Image
            vars:
              text: file://images/chart.png
              language: French
          - description: Structured
            vars:
              text: {greeting: Hello}
              language: French
        """)
    assert cases_of(into)["Greeting"]["vars"] == {"text": "Good morning", "language": ["French", "German", "Spanish"]}
    assert names(into) == {f"Greeting[language={lang}]": ["not-icontains"] for lang in ("French", "German", "Spanish")}
    items = "\n".join(listed(into))
    assert "- `tests[1].vars.text`: `file://images/chart.png` — not converted, nor is its test: it is read" in items
    assert "- `tests[2].vars.text`: `{\"greeting\": \"Hello\"}` — not converted, nor is its test: an object" in items


# Modelled on site/docs/configuration/guide.md ("Default test cases"), site/docs/configuration/expected-outputs/
# model-graded/llm-rubric.md and expected-outputs/index.md ("Overriding the LLM grader": defaultTest.options.provider,
# a test's own options.provider), and reference.md (options.transform, options.rubricPrompt, metadata).
def test_default_test_vars_asserts_and_grader_become_file_defaults_and_judges(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['You are {{persona}}. Answer: {{question}}']
        providers: [openai:gpt-4o-mini]
        defaultTest:
          vars:
            persona: a helpful librarian
          options:
            provider: openai:chat:gpt-4o-mini
            transform: output.trim()
            rubricPrompt: 'Grade this: {{output}}'
          assert:
            - type: not-icontains
              value: As an AI
            - type: llm-rubric
              value: Answers "{{question}}" politely
          metadata:
            suite: smoke
        tests:
          - description: Atlases
            vars:
              question: Where are the atlases?
            options:
              provider:
                id: anthropic:messages:claude-3-5-haiku-20241022
                config:
                  temperature: 0
          - description: Hours
            vars:
              question: When do you close?
            assert:
              - type: llm-rubric
                value: Gives opening hours
                provider: openai:gpt-4o
        """)
    data = fixture(into)
    assert data["defaults"]["vars"] == {"persona": "a helpful librarian"}
    assert data["defaults"]["assert"] == [{"type": "not-icontains", "value": "As an AI"}]
    cases = cases_of(into)
    assert cases["Atlases"]["assert"] == [
        {"type": "llm-rubric", "value": 'Answers "Where are the atlases?" politely', "endpoint": "judge"}]
    hours = cases["Hours"]["assert"]
    assert [e["value"] for e in hours] == ['Answers "When do you close?" politely', "Gives opening hours"]
    endpoints = yaml.safe_load((into / "envelope-ci.yaml").read_text("utf-8"))["endpoints"]
    assert endpoints["judge"]["provider"] == "anthropic-messages" and endpoints["judge"]["temperature"] == 0
    assert {endpoints[hours[0]["endpoint"]]["model"], endpoints[hours[1]["endpoint"]]["model"]} == {
        "gpt-4o-mini", "gpt-4o"}
    assert names(into) == {"Atlases": ["not-icontains", "llm-rubric"],
                           "Hours": ["not-icontains", "llm-rubric", "llm-rubric"]}
    items = "\n".join(listed(into))
    for item in ("- `defaultTest.options.transform`: `output.trim()` — not converted",
                 "- `defaultTest.options.rubricPrompt`: `Grade this: {{output}}` — not converted",
                 "- `defaultTest.metadata`: `{\"suite\": \"smoke\"}` — not converted"):
        assert item in items


# Modelled on site/docs/configuration/reference.md, "Config" (tags, env, outputPath, evaluateOptions.*,
# extensions, commandLineOptions), site/docs/configuration/scenarios.md, expected-outputs/index.md
# ("Creating derived metrics", `assertionTemplates` with `$ref`) and site/docs/configuration/outputs.md (sharing).
def test_top_level_keys_without_an_envelope_ci_meaning_are_each_listed_by_name(tmp_path):
    into, out = import_text(tmp_path, """\
        description: Everything else
        tags: {env: production}
        outputPath: ./results/output.json
        sharing: false
        evaluateOptions:
          maxConcurrency: 2
          repeat: 3
        extensions:
          - file://hooks.py:extension_hook
        commandLineOptions:
          maxConcurrency: 10
        derivedMetrics:
          - name: f1_score
            value: 2 * precision * recall / (precision + recall)
        assertionTemplates:
          mentionsHealth:
            type: icontains
            value: health
        scenarios:
          - config:
              - vars: {language: French}
            tests:
              - vars: {input: Hello}
        prompts: ['Say something about {{topic}}']
        providers: [openai:gpt-4o-mini]
        tests:
          - vars: {topic: exercise}
            assert:
              - $ref: '#/assertionTemplates/mentionsHealth'
              - type: icontains
                value: exercise
        """, None, "--dry-run")
    assert not (tmp_path / "evals").exists()
    for key in ("tags", "outputPath", "sharing", "evaluateOptions", "extensions", "commandLineOptions",
                "derivedMetrics", "assertionTemplates", "scenarios"):
        assert f"- `{key}`: " in out and "no envelope-ci setting means this" in out, key
    assert "- `tests[0].assert[0]`: " in out
    into, _ = import_text(tmp_path / "real", textwrap.dedent("""\
        scenarios:
          - config: [{vars: {language: French}}]
            tests: [{vars: {input: Hello}}]
        prompts: ['Say something about {{topic}}']
        tests:
          - vars: {topic: exercise}
        """))
    assert names(into) == {"test-1": []}
    assert listed(into)[0].startswith("- `scenarios`: ")


# Modelled on site/docs/configuration/reference.md ("Test Case": `assert: Assertion[]`) and src/util/testCaseReader.ts,
# which loads a test's `file://` values (`maybeLoadConfigFromExternalFile`), so an `assert` may name a file.
def test_an_assert_list_read_from_a_file_is_listed_once_and_the_rest_still_converts(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['Summarize: {{article}}']
        providers: [openai:gpt-4o-mini]
        defaultTest:
          assert: file://default_asserts.yaml
        tests:
          - description: Council
            vars: {article: The council met on Tuesday.}
            assert: file://asserts.yaml
          - description: Budget
            vars: {article: The budget passed.}
            assert:
              - type: icontains
                value: budget
        """, {"asserts.yaml": "- type: icontains\n  value: council\n", "default_asserts.yaml": "- type: is-json\n"})
    assert names(into) == {"Council": [], "Budget": ["icontains"]}
    assert listed(into) == [
        "- `defaultTest.assert`: `file://default_asserts.yaml` — not converted: not a list of assertions; write them "
        "inline",
        "- `tests[0].assert`: `file://asserts.yaml` — not converted: not a list of assertions; write them inline"]


# Modelled on site/docs/configuration/test-cases.md ("Special CSV Columns": promptfoo's `__` names) written by hand
# into a YAML tests file, where they are no CSV columns: the import must still finish and the suite load.
def test_a_yaml_test_holding_double_underscore_keys_imports_without_a_traceback(tmp_path):
    into, _ = import_text(tmp_path, """\
        prompts: ['Translate to French: {{input}}']
        providers: [openai:gpt-4o-mini]
        tests: file://tests.yaml
        """, {"tests.yaml": """\
            - vars: {input: Hello}
              __columns: [__prefix, __suffix]
              __cells: none
              assert:
                - type: icontains
                  value: bonjour
            """})
    assert names(into) == {"test-1": ["icontains"]}
