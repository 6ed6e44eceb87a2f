"""``run --filter`` compares the whole suite with the pins: a case outside the filter that a changed prompt file,
variable or fixture modified is named, as a whole run and a merged sharded run name it."""
from __future__ import annotations

import pytest
import yaml

from tests.support.suites import answer_case, make_suite, run_report, write_pins

pytestmark = pytest.mark.usefixtures("clean_env")


def pinned_suite(tmp_path):
    """Three easy right cases, one sending a prompt file with a variable; pinned by an adjudication run."""
    greeting = {k: v for k, v in answer_case("greeting", stratum="easy").items() if k != "prompt"}
    greeting.update(prompt_file="prompts/greet.md", vars={"name": "Ada"})
    suite = make_suite(tmp_path, [greeting, answer_case("refund", stratum="easy"), answer_case("status", stratum="easy")],
                       files={"prompts/greet.md": "Greet {{ name }}. Reply with JSON.\n"})
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    return suite


def edit_case(suite, case_id, **fields):
    cases = yaml.safe_load((suite / "cases.yaml").read_text("utf-8"))
    next(c for c in cases if c["id"] == case_id).update(fields)
    (suite / "cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False), "utf-8")


CHANGES = {
    "prompt-file": (lambda s: (s / "prompts" / "greet.md").write_text("Greet {{ name }} warmly.\n", "utf-8"),
                    ["greeting"], ["prompts/greet.md"]),
    "variable": (lambda s: edit_case(s, "greeting", vars={"name": "Bo"}), ["greeting"], ["cases.yaml"]),
    "fixture": (lambda s: edit_case(s, "status", description="edited"), ["status"], ["cases.yaml"]),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_filter_run_names_the_cases_outside_it_that_a_change_modified(tmp_path, change):
    suite = pinned_suite(tmp_path)
    edit, modified, files = CHANGES[change]
    edit(suite)
    result, report = run_report(suite, tmp_path / "filtered", "--filter", "refund")
    assert result.code == 1, result.out + result.err
    assert [row["id"] for row in report["cases"]] == ["refund"]
    assert report["fixtures"]["modified"] == modified and report["fixtures"]["files_changed"] == files
    assert report["fixtures"]["added"] == [] and report["fixtures"]["removed"] == []
    (alert,) = [a["message"] for a in report["alert_details"] if a["code"] == "fixtures_changed"]
    assert f"modified: {', '.join(modified)}" in alert and "no case changed" not in alert, alert
    _, whole = run_report(suite, tmp_path / "whole")
    assert whole["fixtures"]["modified"] == report["fixtures"]["modified"]


def test_a_filter_run_over_unchanged_fixtures_names_nothing(tmp_path):
    suite = pinned_suite(tmp_path)
    result, report = run_report(suite, tmp_path / "out", "--filter", "refund")
    assert result.code == 3, result.out
    assert report["fixtures"]["changed"] is False and report["fixtures"]["modified"] == []
