"""Grading: envelope-level judgement (``envelope``), answer assertions (``assertions``), one grade (``grade``)."""
