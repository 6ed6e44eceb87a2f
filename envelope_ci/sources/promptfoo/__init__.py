"""``envelope-ci import promptfooconfig.yaml``: a promptfoo config becomes fixtures, settings and ``IMPORT.md``.

``convert`` is the mapping, from the parsed config to the files to write and the list of what
could not be converted and why: it runs nothing the config names (``file://*.js`` prompts,
``javascript`` asserts, transforms) and reads only the files ``Source.read`` hands it.
``plan`` and ``write`` are the edge: they read the config and its files, and write every file or none.
The mapping follows promptfoo's documentation, cited in docs/promptfoo.md.

Modules: ``shown`` (the listed item, the config's files, config values shown without a key),
``providers`` (model runs, judge and embeddings endpoints), ``asserts``, ``prompts``, ``tests_files``
(tests lists, ``file://`` tests, CSV), ``builder`` (one prompt's cases), ``convert`` (the whole config)
and ``notes`` (IMPORT.md, ``plan`` and ``write``).
"""
from .notes import looks_like_promptfoo, plan, write

__all__ = ["looks_like_promptfoo", "plan", "write"]


