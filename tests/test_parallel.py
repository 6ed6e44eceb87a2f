"""parallel.in_background: a job worked out in a forked child while the run goes on, and every way it can end."""
from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import time
import weakref
from functools import partial
from pathlib import Path

import pytest
from conftest import ERROR_BODIES, chat_body, recorded, tool_call, transport_error, write_replay

from envelope_ci import parallel
from envelope_ci.errors import Problem, UsageError
from envelope_ci.grading.envelope import ReadAhead
from envelope_ci.model import Label
from envelope_ci.parallel import Packing, in_background, parallel_map, run_concurrently
from envelope_ci.providers.base import Reply
from envelope_ci.sources.recordings import REPLAY_PACKING, ReplayLine, iter_replay

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods() or (os.cpu_count() or 1) < 2,
                                reason="in_background forks only where fork exists and there is a second core")


def test_the_value_is_worked_out_in_another_process():
    parent = os.getpid()
    with in_background(lambda: [os.getpid(), "x" * 1_000_000, *range(12_345)]) as outcome:
        worker, text, *numbers = outcome()
    assert worker != parent and text == "x" * 1_000_000 and numbers == list(range(12_345))  # in parts, in order
    assert not multiprocessing.active_children()


def test_items_are_packed_there_and_unpacked_here():
    parent = os.getpid()
    packing = Packing(lambda item: (os.getpid(), item), lambda data: (data[0] != parent, data[1]))
    with in_background(lambda: [f"item {i}" for i in range(12_345)], packing=packing) as outcome:
        items = outcome()
    assert items == [(True, f"item {i}") for i in range(12_345)]


def test_a_replay_line_packed_and_unpacked_is_the_same_records():
    reply = Reply('{"a": 1}', ({"type": "function", "function": {"name": "f"}},), None, "stop", "m", 3)
    ahead = ReadAhead(200, 12.5, None, 1, ("note",), Label.TRUNCATED, ("cut",), reply, ({"a": 1},))
    lines = [ReplayLine(7, "case-1", (ahead, ahead._replace(reply=None, label=None)), None, [{"model": "m"}, None]),
             ReplayLine(8, "case-2", '{"id": "case-2", "recorded": {}}', ("recorded", "is empty"), []),
             ReplayLine(9, None, "not a recording", None, [])]
    for line in lines:
        back = REPLAY_PACKING.unpack(pickle.loads(pickle.dumps(REPLAY_PACKING.pack(line))))
        assert back == line and type(back) is ReplayLine
        for sent, came in zip(line.held, back.held, strict=True) if not isinstance(line.held, str) else ():
            assert type(came) is ReadAhead and came.label is sent.label
            assert came.reply is None if sent.reply is None else type(came.reply) is Reply


def test_a_replay_read_in_the_background_is_the_replay_read_here(tmp_path):
    path = write_replay(tmp_path / "recordings.jsonl", [
        ("right", recorded(chat_body('{"a": 1}'))),
        ("cut", recorded(chat_body('{"a": 1', finish_reason="length"))),
        ("repeats", [recorded(chat_body("yes")), recorded(chat_body(None, tool_calls=[tool_call()]))]),
        ("down", recorded(ERROR_BODIES["llamacpp_loading"], status=503)),
        ("torn", transport_error()),
        ("judged", recorded(chat_body("yes"), judgements={"j": recorded(chat_body("PASS"))})),
        ("bad", {"http_status": "200"}),
    ])
    with in_background(partial(iter_replay, path), packing=REPLAY_PACKING) as outcome:
        lines = outcome()
    assert lines == list(iter_replay(path)) and any(not isinstance(line.held, str) for line in lines)


def test_a_usage_error_comes_back_with_its_problems():
    problems = [Problem("rec.jsonl", 3, "recorded.http_status", "'200' is not of type 'integer'")]

    def fails() -> list[None]:
        raise UsageError(problems)

    with in_background(fails) as outcome:
        with pytest.raises(UsageError) as info:
            outcome()
    assert info.value.problems == problems


def test_a_child_that_fails_otherwise_leaves_the_work_to_this_process():
    parent = os.getpid()

    def only_here() -> list[int]:
        if os.getpid() != parent:
            os._exit(9)  # died without a word, as a killed child would
        return [42]

    with in_background(only_here) as outcome:
        assert outcome() == [42]


def test_a_list_the_child_cannot_send_is_worked_out_here_instead(capfd):
    parent = os.getpid()

    def unpicklable_there() -> list[object]:
        return [lambda: None] if os.getpid() != parent else [7]  # a lambda does not pickle

    with in_background(unpicklable_there) as outcome:
        assert outcome() == [7]
    assert "Traceback" not in capfd.readouterr().err  # the child said "failed" and ended quietly


def test_an_error_of_the_job_itself_is_met_here_as_itself():
    with in_background(lambda: [1 // 0]) as outcome:
        with pytest.raises(ZeroDivisionError):
            outcome()


def test_a_child_still_working_when_the_run_fails_first_is_stopped():
    started = time.monotonic()
    with pytest.raises(RuntimeError):
        with in_background(lambda: [time.sleep(60)]):
            raise RuntimeError("the fixtures did not load")
    assert not multiprocessing.active_children() and time.monotonic() - started < 10


def test_not_wanted_runs_the_job_here_when_asked():
    calls = []
    with in_background(lambda: calls.append(os.getpid()) or calls, wanted=False) as outcome:
        assert calls == []
        assert outcome() == [os.getpid()]


def test_parallel_map_keeps_the_order_with_the_parent_working_a_share():
    items = list(range(-9000, 0))
    assert parallel_map(abs, items) == [abs(x) for x in items]


def _replay_run(tmp_path, monkeypatch, early_bytes: int, lines, out: str):
    """A run of a 3-case suite over ``lines`` replayed, read early (in a forked child) at or above ``early_bytes``."""
    from conftest import case, make_suite, run_cli, write_replay

    import envelope_ci.api as api

    monkeypatch.setattr(api, "READ_REPLAY_EARLY_BYTES", early_bytes)
    suite = tmp_path / "suite"
    if not suite.exists():
        make_suite(tmp_path, [case(f"c{i}", expect_json={"answer": 42}, max_chars=80) for i in range(3)])
    replay = write_replay(tmp_path / "replay.jsonl", lines)
    return run_cli(["run", suite, "--replay", replay, "--out", tmp_path / out])


def test_a_replay_read_early_grades_exactly_as_one_read_in_turn(tmp_path, monkeypatch):
    from conftest import answer_envelope, transport_error

    lines = [("c0", answer_envelope()), ("c1", answer_envelope('{"answer": 7}')), ("c2", transport_error()), ("c0", answer_envelope())]
    in_turn = _replay_run(tmp_path, monkeypatch, 1 << 40, lines, "in-turn")
    early = _replay_run(tmp_path, monkeypatch, 0, lines, "early")
    assert (early.code, early.out, early.err) == (in_turn.code, in_turn.out.replace("in-turn", "early"), in_turn.err)
    for name in ("report.json", "report.md", "junit.xml"):
        assert (tmp_path / "early" / name).read_bytes() == (tmp_path / "in-turn" / name).read_bytes(), name


def test_a_replay_read_early_names_the_same_problems(tmp_path, monkeypatch):
    from conftest import answer_envelope

    lines = [("c0", answer_envelope()), ("nope", answer_envelope()), ("c1", {"http_status": "200"})]
    in_turn = _replay_run(tmp_path, monkeypatch, 1 << 40, lines, "in-turn")
    early = _replay_run(tmp_path, monkeypatch, 0, lines, "early")
    assert in_turn.code == early.code == 2 and early.err == in_turn.err
    assert "replay.jsonl:2: id: 'nope' matches no case" in early.err and "replay.jsonl:3: recorded.http_status" in early.err


def test_a_big_replay_is_read_in_another_process(tmp_path, monkeypatch):
    from conftest import answer_envelope

    import envelope_ci.api as api

    readers = tmp_path / "readers"
    real = api.iter_replay

    def noted(path):
        with readers.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(path)

    monkeypatch.setattr(api, "iter_replay", noted)
    result = _replay_run(tmp_path, monkeypatch, 0, [(f"c{i}", answer_envelope()) for i in range(3)], "out")
    assert result.code in (0, 1), result.err
    assert readers.read_text().split() != [str(os.getpid())] and len(readers.read_text().split()) == 1


def test_a_child_whose_parent_was_killed_ends_instead_of_waiting_on_the_pipe(tmp_path):
    """--max-run-time kills the run with SIGKILL: its reader, left with nobody to answer, must end rather than block for ever."""
    import subprocess
    import sys

    pid_file = tmp_path / "child.pid"
    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from envelope_ci.parallel import in_background\n"
        "def job():\n"
        f"    Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "    time.sleep(1.0)\n"
        "    return ['x' * 100_000] * 200  # 20 MB: far more than a pipe holds\n"
        "with in_background(job):\n"
        f"    while not Path({str(pid_file)!r}).exists():\n"
        "        time.sleep(0.01)\n"
        "    os._exit(0)  # gone without a word, as a killed process is\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _state(child) not in ("gone", "Z"):
        time.sleep(0.1)
    still = _state(child) not in ("gone", "Z")
    if still:
        os.kill(child, 9)
    assert not still, "the orphaned child still runs"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except OSError:
        return "gone"


def test_a_core_a_background_job_works_on_is_not_given_to_parallel_map(monkeypatch):
    """On 2 cores with a replay being read, validating in two processes more cost CPU and memory and saved nothing."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    items = list(range(40))

    def where(_: int) -> int:
        return os.getpid()

    assert set(parallel_map(where, items, min_items=2)) != {os.getpid()}  # two cores free: one slice forked
    with in_background(lambda: [time.sleep(3)]):
        assert set(parallel_map(where, items, min_items=2)) == {os.getpid()}  # one core left: all here
    assert set(parallel_map(where, items, min_items=2)) != {os.getpid()}
    with in_background(lambda: [time.sleep(3)], idle=True) as idle:  # it takes only what is left: no core counted
        assert set(parallel_map(where, items, min_items=2)) != {os.getpid()}
        assert idle() == [None]


def test_concurrent_jobs_run_once_each_with_a_child_per_other_core(tmp_path):
    parent = os.getpid()

    def job(name: str):
        return lambda: (tmp_path / name).write_text(str(os.getpid()), "utf-8")

    run_concurrently([job(f"job-{i}") for i in range(5)])
    pids = [int((tmp_path / f"job-{i}").read_text("utf-8")) for i in range(5)]
    assert pids[0] == parent and parent not in pids[1:]  # this process runs the first, children the rest
    assert len(set(pids[1:])) == min(4, (os.cpu_count() or 1) - 1)  # one child per other core, not one per job
    assert not multiprocessing.active_children()


def test_a_concurrent_writer_finishes_its_file_through_a_sigterm(tmp_path):
    parent = os.getpid()

    def cancelled_midway() -> None:
        assert os.getpid() != parent  # in a child: never the test's own process
        os.kill(os.getpid(), signal.SIGTERM)  # a cancelled job, while this child writes
        (tmp_path / "written").write_text("whole", "utf-8")

    run_concurrently([lambda: None, cancelled_midway])
    assert (tmp_path / "written").read_text("utf-8") == "whole"


def test_a_failed_concurrent_job_is_an_error_here(tmp_path):
    def fails() -> None:
        raise OSError("disk full")

    with pytest.raises(RuntimeError, match="1 of 1 child processes writing in parallel failed"):
        run_concurrently([lambda: None, lambda: None, fails])


def test_pins_and_fixture_changes_are_the_same_with_the_digests_worked_out_meanwhile(tmp_path, monkeypatch):
    """A big replay's run loads its cases without their digests and has an idle child work them out: nothing it writes differs."""
    from conftest import answer_envelope, run_cli

    import envelope_ci.api as api

    digesters = tmp_path / "digesters"
    real = api.suite_case_digests

    def noted(root, exclude):
        with digesters.open("a") as fh:
            fh.write(f"{os.getpid()} {os.getpriority(os.PRIO_PROCESS, 0)}\n")
        return real(root, exclude)

    monkeypatch.setattr(api, "suite_case_digests", noted)
    lines = [(f"c{i}", answer_envelope()) for i in range(3)]
    pins = tmp_path / "suite" / "envelope-pins.json"
    written = {}
    for name, early_bytes in (("in-turn", 1 << 40), ("early", 0)):
        pins.unlink(missing_ok=True)
        _replay_run(tmp_path, monkeypatch, early_bytes, lines, f"first-{name}")
        suite, replay = tmp_path / "suite", tmp_path / "replay.jsonl"
        result = run_cli(["run", suite, "--replay", replay, "--out", tmp_path / f"pins-{name}", "--lane", "adjudication", "--write-pins"])
        assert result.code == 0, result.err
        written[name] = pins.read_bytes()
    assert written["early"] == written["in-turn"] and b"sha256:" in written["early"]
    # The digests were worked out elsewhere, at the lowest priority, in the early runs only.
    pids, priorities = zip(*(line.split() for line in digesters.read_text().splitlines()), strict=True)
    assert len(pids) == 2 and str(os.getpid()) not in pids and set(priorities) == {"19"}
    # A case edited after the pins is found modified either way, by its digest.
    cases_file = tmp_path / "suite" / "cases.yaml"
    cases_file.write_text(cases_file.read_text("utf-8").replace("Prompt for c1.", "Prompt for c1, edited."), "utf-8")
    for name, early_bytes in (("in-turn", 1 << 40), ("early", 0)):
        _replay_run(tmp_path, monkeypatch, early_bytes, lines, f"edited-{name}")
    edited = (tmp_path / "edited-early" / "report.json").read_bytes()
    assert edited == (tmp_path / "edited-in-turn" / "report.json").read_bytes()
    assert json.loads(edited)["fixtures"]["modified"] == ["c1"]


def test_an_idle_job_not_done_in_its_grace_is_done_here_instead(monkeypatch):
    """A child at nice 19 may wait for a core as long as other work lasts: the caller waits on it only so long."""
    monkeypatch.setattr(parallel, "IDLE_GRACE_S", 0.3)
    started = time.monotonic()
    with in_background(lambda: [time.sleep(30), os.getpid()][1:], idle=True) as outcome:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(time, "sleep", lambda _: None)  # here, the job is quick
            assert outcome() == [os.getpid()]
    assert time.monotonic() - started < 10


def test_an_idle_job_asked_for_early_is_waited_for_within_its_grace():
    with in_background(lambda: [time.sleep(0.5), os.getpid()][1:], idle=True) as outcome:
        assert outcome() != [os.getpid()]


def test_a_later_job_holds_no_reading_end_of_an_earlier_jobs_pipe():
    """A reader left in a sibling would keep the earlier job's child waiting on a full pipe once this process is gone."""
    def pipes_held() -> list[tuple[int, int]]:
        held = []
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            held.append((st.st_dev, st.st_ino))
        return held

    with in_background(lambda: [time.sleep(3)]):
        (earlier,) = parallel._readers
        st = os.fstat(earlier.fileno())
        with in_background(pipes_held) as later:
            assert (st.st_dev, st.st_ino) not in set(later())


def test_a_background_jobs_items_are_pickled_and_let_go_a_part_at_a_time():
    """A 100,000-line replay's judged lines, held whole in the reader, were 95 MB of its 166: each part goes as it is pickled."""
    count = 5 * parallel._CHUNK
    alive: set[int] = set()
    most = 0

    class Item:
        pass

    def items():
        nonlocal most
        for _ in range(count):
            item = Item()
            alive.add(id(item))
            weakref.finalize(item, alive.discard, id(item))
            most = max(most, len(alive))
            yield item

    messages = parallel._outcome_pickled(items, Packing(lambda item: 1, lambda packed: packed))
    sent = [pickle.loads(message) for message in messages]
    assert [kind for kind, _ in sent] == ["part"] * 5 + ["done"] and sum(len(part) for kind, part in sent if kind == "part") == count
    assert most <= 2 * parallel._CHUNK + 1  # the part being pickled and the next being read
