"""envelope-ci: gate pull requests on LLM prompt evals, envelope by envelope."""

__version__ = "0.1.0"
