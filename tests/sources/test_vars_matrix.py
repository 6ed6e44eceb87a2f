"""The vars matrix: a list-valued var makes one case per value (one per combination), each with its own id, digest
and pin; ``{value: [...]}`` keeps a list a list."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest
import yaml

from envelope_ci.canonical import digest
from envelope_ci.errors import UsageError
from envelope_ci.sources import templates
from envelope_ci.sources.cases import fixture_schema, load_cases
from envelope_ci.sources.pins import read_pins
from envelope_ci.sources.templates import MAX_MATRIX_CASES
from tests.support.suites import answer_case, case, make_suite, run_report, write_pins

pytestmark = pytest.mark.usefixtures("clean_env")

REFUND = ("- id: refund-window\n"
          "  prompt: 'In {{ city }}, answering {{ tone }} for {{ shop }}: how long is the refund window?'\n"
          "  vars:\n"
          "    city: [Paris, Lyon]\n"
          "    tone: [formal, casual]\n"
          "    shop: Northwind\n"
          "  completion: 30 days\n")


def loaded(tmp_path, text, name="cases.yaml"):
    return {c.id: c for c in load_cases(make_suite(tmp_path, files={name: text}), set())}


def problems_of(root):
    with pytest.raises(UsageError) as caught:
        load_cases(root, set())
    return [str(p).replace(root.parent.as_posix() + "/", "") for p in caught.value.problems]


# -- ids and order ---------------------------------------------------------------------------------

def test_list_valued_vars_make_one_case_per_combination_in_product_order(tmp_path):
    cases = loaded(tmp_path, REFUND)
    assert list(cases) == [
        "refund-window[city=Paris,tone=formal]",
        "refund-window[city=Paris,tone=casual]",
        "refund-window[city=Lyon,tone=formal]",
        "refund-window[city=Lyon,tone=casual]",
    ]
    assert cases["refund-window[city=Lyon,tone=formal]"].messages == (
        {"role": "user", "content": "In Lyon, answering formal for Northwind: how long is the refund window?"},)


def test_the_id_names_only_the_list_valued_vars_in_written_order(tmp_path):
    text = ("- id: greet\n  prompt: '{{ b }} {{ shop }} {{ a }}'\n"
            "  vars: {b: [2, 1], shop: Northwind, a: [true]}\n  completion: ok\n")
    assert list(loaded(tmp_path, text)) == ["greet[b=2,a=true]", "greet[b=1,a=true]"]


def test_one_list_makes_ids_with_one_name(tmp_path):
    text = "- id: refund-window\n  prompt: '{{ city }}'\n  vars: {city: [Paris, Lyon]}\n  completion: ok\n"
    assert list(loaded(tmp_path, text)) == ["refund-window[city=Paris]", "refund-window[city=Lyon]"]


def test_a_defaults_list_expands_every_case_of_the_file_defaults_names_first(tmp_path):
    text = ("defaults:\n  vars: {lang: [en, fr]}\n  completion: ok\n"
            "cases:\n"
            "  - id: a\n    prompt: '{{ lang }} {{ city }}'\n    vars: {city: [Paris, Lyon]}\n"
            "  - id: b\n    prompt: 'no placeholder: the defaults serve every case'\n"
            "  - id: c\n    prompt: '{{ lang }}'\n    vars: {lang: de}\n")  # a value of its own: no matrix
    assert list(loaded(tmp_path, text)) == [
        "a[lang=en,city=Paris]", "a[lang=en,city=Lyon]", "a[lang=fr,city=Paris]", "a[lang=fr,city=Lyon]",
        "b[lang=en]", "b[lang=fr]",
        "c",
    ]


def test_each_expanded_case_keeps_the_rest_of_the_case(tmp_path):
    text = ("- id: r\n  stratum: medium\n  tags: [billing]\n  prompt: '{{ city }}'\n  vars: {city: [Paris, Lyon]}\n"
            "  must_include: [days]\n  completion: 30 days\n")
    for kase in loaded(tmp_path, text).values():
        assert (kase.stratum, kase.tags, kase.completion, kase.line) == ("medium", ("billing",), "30 days", 1)
        assert len(kase.expectations) == 1


# -- digests and pins -------------------------------------------------------------------------------

def test_each_expanded_case_hashes_its_own_data_with_its_value_substituted(tmp_path):
    cases = loaded(tmp_path, REFUND)
    assert len({c.digest for c in cases.values()}) == 4
    written = yaml.safe_load(REFUND)[0]
    expected = {**written, "id": "refund-window[city=Lyon,tone=casual]",
                "vars": {"city": "Lyon", "tone": "casual", "shop": "Northwind"}}
    assert cases["refund-window[city=Lyon,tone=casual]"].digest == digest(expected)


DIGESTS = ("import json, sys, pathlib; from envelope_ci.sources.cases import load_cases; "
           "print(json.dumps({c.id: c.digest for c in load_cases(pathlib.Path(sys.argv[1]), set())}))")


@pytest.mark.parametrize("seed", ["1", "2"])
def test_expanded_ids_and_digests_are_the_same_in_another_process(tmp_path, seed):
    here = {i: c.digest for i, c in loaded(tmp_path, REFUND).items()}
    child = subprocess.run([sys.executable, "-c", DIGESTS, tmp_path / "suite"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}, timeout=60, check=True)
    assert list(json.loads(child.stdout).items()) == list(here.items())


def test_a_case_without_a_list_hashes_its_data_as_written(tmp_path):
    text = "- id: plain\n  prompt: '{{ city }}'\n  vars: {city: Paris}\n  completion: ok\n"
    assert loaded(tmp_path, text)["plain"].digest == digest(yaml.safe_load(text)[0])


def matrix_suite(tmp_path, cities):
    """A stretch case per city, right, beside two pinned-wrong ones so that no strata alert fires."""
    kase = {**answer_case("refund-window"), "prompt": "Refund window in {{ city }}?", "vars": {"city": cities}}
    return make_suite(tmp_path, [kase, answer_case("w-1", '{"answer": 1}'), answer_case("w-2", '{"answer": 1}')])


def test_pins_are_written_per_expanded_case_with_its_own_hash(tmp_path):
    suite = matrix_suite(tmp_path, ["Paris", "Lyon"])
    result = write_pins(suite, tmp_path / "pins-out")
    assert result.code == 0, result.err + result.out
    pins = read_pins(suite / "envelope-pins.json")
    assert pins is not None
    cases = {c.id: c for c in load_cases(suite, {(suite / "envelope-pins.json").resolve()})}
    matrix = ["refund-window[city=Paris]", "refund-window[city=Lyon]"]
    assert sorted(pins.cases) == sorted([*matrix, "w-1", "w-2"])
    assert {i: pins.cases[i].hash for i in matrix} == {i: cases[i].digest for i in matrix}


def test_changing_one_value_adds_and_removes_that_case_only(tmp_path):
    suite = matrix_suite(tmp_path, ["Paris", "Lyon"])
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    matrix_suite(tmp_path, ["Paris", "Nice"])  # rewrites cases.yaml in place
    result, report = run_report(suite, tmp_path / "out")
    assert report is not None, result.err
    fixtures = report["fixtures"]
    assert (fixtures["added"], fixtures["removed"], fixtures["modified"]) == (
        ["refund-window[city=Nice]"], ["refund-window[city=Lyon]"], [])


# -- {value: [...]}: a list kept a list ------------------------------------------------------------

def test_a_value_list_stays_one_case_and_is_sent_as_json(tmp_path):
    text = "- id: order\n  prompt: 'Items: {{ items }}'\n  vars: {items: {value: [boots, 2, café]}}\n  completion: ok\n"
    cases = loaded(tmp_path, text)
    assert list(cases) == ["order"]
    assert cases["order"].messages[0]["content"] == 'Items: ["boots", 2, "café"]'
    assert cases["order"].digest == digest(yaml.safe_load(text)[0])


def test_a_value_list_beside_a_matrix_is_sent_whole_in_every_case(tmp_path):
    text = ("- id: order\n  prompt: '{{ city }}: {{ items }}'\n"
            "  vars: {city: [Paris, Lyon], items: {value: [a, b]}}\n  completion: ok\n")
    assert [c.messages[0]["content"] for c in loaded(tmp_path, text).values()] == ['Paris: ["a", "b"]',
                                                                                    'Lyon: ["a", "b"]']


def test_the_printed_file_schema_accepts_a_matrix_and_a_value_list():
    data = yaml.safe_load(REFUND.replace("shop: Northwind", "shop: {value: [1, 2]}"))
    jsonschema.validate(data, fixture_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{**data[0], "vars": {"city": []}}], fixture_schema())


# -- odd values in ids -------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "spelled"), [
    ("New York", "New%20York"),
    ("a,b", "a%2Cb"),
    ("k=v", "k%3Dv"),
    ("[x]", "%5Bx%5D"),
    ("50%", "50%25"),
    ("tab\there", "tab%09here"),
    ("zero\u200bwidth", "zero%E2%80%8Bwidth"),
    ("café-東京", "café-東京"),
    ("a/b:c*?", "a/b:c*?"),
    (2.5, "2.5"),
    (False, "false"),
])
def test_a_value_appears_in_the_id_percent_encoded_where_it_would_break_it(tmp_path, value, spelled):
    text = yaml.safe_dump([case("q", prompt="{{ v }}", vars={"v": [value, "other"]}, completion="ok")])
    cases = loaded(tmp_path, text)
    assert list(cases) == [f"q[v={spelled}]", "q[v=other]"]
    assert cases[f"q[v={spelled}]"].messages[0]["content"] == (value if isinstance(value, str)
                                                               else json.dumps(value))


# -- refused -------------------------------------------------------------------------------------------

def test_a_value_given_twice_is_refused_on_its_lists_line(tmp_path):
    text = REFUND.replace("[Paris, Lyon]", "[Paris, Lyon, Paris]")
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "suite/cases.yaml:4: vars.city: 'Paris' is in the list twice: the matrix would make every case naming "
        "city=Paris twice; give each value once"]


def test_two_values_one_id_spells_alike_are_refused(tmp_path):
    text = "- id: n\n  prompt: '{{ n }}'\n  vars:\n    n: [1, '1']\n  completion: ok\n"
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "suite/cases.yaml:4: vars.n: 1 and '1' are both written n=1 in a case id: the matrix would make every case "
        "naming n=1 twice; give each value once"]


def test_an_expanded_id_that_another_case_has_is_a_duplicate_on_its_line(tmp_path):
    text = ("- id: a\n  prompt: '{{ x }}'\n  vars: {x: [1, 2]}\n  completion: ok\n"
            "- id: a[x=2]\n  prompt: p\n  completion: ok\n")
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "suite/cases.yaml:5: id: duplicate id 'a[x=2]' (first defined at suite/cases.yaml:1)"]


def test_a_matrix_of_more_combinations_than_the_cap_is_refused(tmp_path):
    assert MAX_MATRIX_CASES == 1000
    text = yaml.safe_dump([case("big", prompt="{{ a }}{{ b }}", vars={"a": list(range(7)), "b": list(range(143)),
                                                                       "c": "x"}, completion="ok")])
    text = text.replace("{{ b }}", "{{ b }}{{ c }}")
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "suite/cases.yaml:4: vars: a matrix of 1,001 cases (7 × 143), more than the 1,000 one case may make: "
        "use fewer or shorter lists, or split the case"]


def test_a_matrix_of_exactly_the_cap_is_made(tmp_path):
    text = yaml.safe_dump([case("big", prompt="{{ a }}{{ b }}", vars={"a": list(range(8)), "b": list(range(125))},
                                completion="ok")])
    assert len(loaded(tmp_path, text)) == MAX_MATRIX_CASES


def test_matrices_past_the_suites_cap_are_refused_once_where_it_is_crossed(tmp_path, monkeypatch):
    monkeypatch.setattr(templates, "MAX_MATRIX_SUITE_CASES", 5)
    matrix = "- id: {0}\n  prompt: '{{{{ x }}}}'\n  vars: {{x: [1, 2, 3]}}\n  completion: ok\n"
    root = make_suite(tmp_path, files={"a.yaml": matrix.format("a"), "b.yaml": matrix.format("b"),
                                       "c.yaml": matrix.format("c")})
    assert problems_of(root) == ["suite/b.yaml:3: vars: the vars matrices up to case 'b' make more than 5 cases, "
                                 "the most a suite may: use fewer or shorter lists"]


@pytest.mark.parametrize(("var", "expected"), [
    ("x: []", "suite/cases.yaml:4: vars.x: an empty list: a matrix makes one case per value, so this one would make "
              "none"),
    ("x: [{a: 1}]", "suite/cases.yaml:4: vars.x.0: {'a': 1} is not of type 'string', 'number', 'boolean'"),
    ("x: {vaule: [1]}", "suite/cases.yaml:4: vars.x.vaule: unknown key (did you mean 'value'?)"),
])
def test_a_list_that_is_no_matrix_is_refused_on_its_line(tmp_path, var, expected):
    text = f"- id: a\n  prompt: '{{{{ x }}}}'\n  vars:\n    {var}\n  completion: ok\n"
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [expected]


def test_a_template_problem_in_a_matrix_is_said_once_naming_the_written_id(tmp_path):
    text = "- id: a\n  prompt: '{{ cty }}'\n  vars:\n    city: [Paris, Lyon]\n  completion: ok\n"
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "suite/cases.yaml:2: prompt: unknown variable 'cty': add it to the vars of case 'a'",
        "suite/cases.yaml:4: vars.city: unused variable 'city': case 'a' has no {{ city }} in its prompt, system, "
        "messages or their files",
    ]


def test_a_problem_with_a_defaults_list_is_said_once_on_the_defaults_line(tmp_path):
    text = ("defaults:\n  completion: ok\n  vars:\n    lang: [en, fr, en]\n"
            "cases:\n  - id: a\n    prompt: '{{ lang }}'\n  - id: b\n    prompt: '{{ lang }}'\n    vars: {x: [1, 2]}\n")
    assert problems_of(make_suite(tmp_path, files={"cases.yaml": text})) == [
        "suite/cases.yaml:4: vars.lang: 'en' is in the list twice: the matrix would make every case naming lang=en "
        "twice; give each value once"]
