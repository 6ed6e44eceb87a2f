"""What the tests use, not tests of envelope_ci: the servers they start, shared helpers and strategies."""
