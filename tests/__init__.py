"""The test suite: one folder per stage of envelope_ci, as CONTRIBUTING.md ("Where tests go") lays out."""
