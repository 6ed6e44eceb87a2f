"""envelope-ci: gate pull requests on LLM prompt evals, envelope by envelope."""

# The version's one home: pyproject.toml reads this literal (tool.setuptools.dynamic) and the release
# workflow checks the tag against it. Keep it a plain string literal, so both can read it without importing.
__version__ = "0.1.0"
