"""Analysis: graded repeats -> case results judged against pins, strata, lanes, fixtures, the gate. Pure."""
