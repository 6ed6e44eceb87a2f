"""The report: a typed model (``model``), built from an analysis (``build``), serialised by ``codec``."""
