"""The base branch's pins from git (``envelope_ci.action.basepins``): what a clone cannot show is said, never read as
"no pins"."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from envelope_ci.action.basepins import fetch_base_pins
from tests.support.suites import case, git, write_pins

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed: nothing runs it here")




def test_a_partial_clone_without_the_base_pins_content_says_so_and_never_reads_no_pins(tmp_path):
    """filter: blob:none leaves the base commit's pins out of the clone, and git may fetch nothing: the base pins are
    unavailable (the API is asked next), not absent, so a PR that empties the pins cannot pass as the first pins."""
    origin = tmp_path / "origin"
    evals = origin / "evals"
    evals.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    git(origin, "config", "uploadpack.allowFilter", "true")
    (evals / "cases.yaml").write_text(json.dumps([case("refund", must_include=["refund"], completion="refund")]),
                                      "utf-8")
    assert write_pins(evals, tmp_path / "p").code == 0
    git(origin, "add", ".")
    git(origin, "commit", "-qm", "base pins")
    git(origin, "checkout", "-q", "-b", "pr")
    pins = json.loads((evals / "envelope-pins.json").read_text("utf-8"))
    (evals / "envelope-pins.json").write_text(json.dumps({**pins, "cases": {}}, indent=2) + "\n", "utf-8")
    git(origin, "commit", "-qam", "drop every pin")
    git(origin, "checkout", "-q", "main")
    git(origin, "merge", "-q", "--no-ff", "--no-edit", "pr")
    merge = git(origin, "rev-parse", "HEAD").strip()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-local", "--filter=blob:none", origin.resolve().as_uri(), str(clone)],
                   check=True, capture_output=True, timeout=60)
    base = fetch_base_pins(clone, clone, clone / "evals" / "envelope-pins.json", merge, {"base": {"sha": "0" * 40}},
                           None)
    assert base.pins is None and base.error is not None
    assert "its content is not in this clone (a partial clone" in base.error and "does not exist" not in base.error
