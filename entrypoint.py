#!/usr/bin/env python3
"""The GitHub Action's entrypoint (the container runs ``python /app/entrypoint.py``).

Thin on purpose: everything lives in ``envelope_ci.action``. It runs the same way outside a
container, from a checkout, with the runner's variables set:

    GITHUB_WORKSPACE=$PWD INPUT_FIXTURES=evals python entrypoint.py
"""
import sys
from pathlib import Path

# From a checkout, the package beside this file is used even when it is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from envelope_ci.action.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
