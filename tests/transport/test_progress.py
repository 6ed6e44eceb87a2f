"""The live progress line counts each case by its final label, the judge's verdict included."""
from __future__ import annotations

import json

import pytest

from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import case, make_suite, run_report


@pytest.mark.parametrize("passed, label", [(True, "right"), (False, "wrong")])
def test_an_llm_rubric_case_is_counted_by_its_judged_label_not_as_a_drop(srv: FakeOpenAI, tmp_path, passed, label):
    """The model's answer alone has no verdict yet (a drop, were it graded then); the line counts the judged case."""
    srv.plant("model-capital", Behaviour.ok("Paris is the capital of France."))
    srv.plant("judge-capital", Behaviour.ok(json.dumps({"pass": passed, "reason": "said so"})))
    rubric = {"type": "llm-rubric", "value": "Names Paris [[judge-capital]]", "endpoint": "judge"}
    suite = make_suite(tmp_path, [case("capital", prompt="Capital of France? [[model-capital]]", **{"assert": [rubric]})],
                       config={"endpoints": {"judge": {"base_url": srv.url, "model": "judge-m"}}})
    result, report = run_report(suite, tmp_path / "out", "--base-url", srv.url, "--model", "m",
                                "--endpoint", f"judge={srv.url}")
    assert report is not None and report["cases"][0]["label"] == label, result.err
    progress = [line for line in result.err_lines if line.startswith("[1/1]")]
    assert len(progress) == 1 and progress[0].split()[1] == f"{label}=1", result.err
