"""The step log: secrets masked before anything is printed, and the run's own output fenced off from workflow
commands."""

from __future__ import annotations

import contextlib
import io
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import TextIO

from ..formats.escape import visible
from ..github.commands import add_mask
from ..secrets import Secrets


def announce_masks(secrets: Secrets, out: TextIO) -> None:
    """Tell the runner to hide each secret (each of its lines) in the log, before anything else is printed."""
    for value in secrets.values:
        for line in {value, *value.splitlines()}:
            if line.strip():
                out.write(add_mask(line) + "\n")
    out.flush()


class Tee(io.StringIO):
    """Writes through to a stream, secrets masked, and keeps a copy (error messages go into the summary too)."""

    def __init__(self, stream: TextIO, mask: Callable[[str], str]) -> None:
        super().__init__()
        self.stream = stream
        self.mask = mask

    def write(self, text: str) -> int:
        """Write to the stream, and to the copy: secrets masked, invisible characters shown escaped (``\\u200b``)."""
        text = visible(self.mask(text))
        self.stream.write(text)
        return super().write(text)

    def flush(self) -> None:
        """Flush the stream."""
        self.stream.flush()


@contextlib.contextmanager
def fenced_group(out: TextIO, secrets: Secrets, title: str) -> Iterator[Tee]:
    """A collapsed log group in which stdout and stderr echo masked and no line is a workflow command; yields
    stderr's copy.

    The run prints fixture text and model output: a line of it starting with `::` must not
    be taken for a workflow command, and an endpoint that echoes the key must not get it
    into the log (the runner masks it too, but only on a runner).
    """
    token = f"envelope-ci-{uuid.uuid4().hex}"
    out.write(f"::group::{title}\n::stop-commands::{token}\n")
    out.flush()
    stdout, stderr = Tee(out, secrets.mask), Tee(sys.stderr, secrets.mask)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            yield stderr
    finally:
        stdout.flush()
        stderr.flush()
        out.write(f"::{token}::\n::endgroup::\n")
        out.flush()
