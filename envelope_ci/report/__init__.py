"""The report: a typed model (``model``, encoded by msgspec), built from an analysis (``build``)."""
