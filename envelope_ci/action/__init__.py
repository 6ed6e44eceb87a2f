"""The GitHub Action: action inputs -> ``envelope_ci.api.run`` -> comment, summary, annotations, outputs.

The library does all the judging; this package only reads the runner's environment
(``inputs``, ``event``, ``suite``), fetches the base branch's pins (``basepins``), runs the
suite with its output fenced off in the log (``log``, ``run``), and publishes the typed
report (``publish``). ``entrypoint.py`` at the repository root calls ``run.main()``; it runs
the same way outside a container:

    GITHUB_WORKSPACE=$PWD INPUT_FIXTURES=evals python entrypoint.py

Environment read: ``INPUT_<NAME>`` for every input of action.yml (``INPUT_BASE-URL`` as the
runner spells it, or ``INPUT_BASE_URL``), ``EVAL_API_KEY`` (the endpoint key, never an
input) and the variables the ``allow-key-env`` input names (a judge's key, ``${NAME}`` in headers),
``EVAL_BASE_URL``/``EVAL_MODEL`` when the inputs leave them empty, and
``GITHUB_EVENT_PATH``, ``GITHUB_EVENT_NAME``, ``GITHUB_REPOSITORY``, ``GITHUB_API_URL``,
``GITHUB_WORKSPACE``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``, ``GITHUB_SHA`` (plus
``GITHUB_SERVER_URL``/``GITHUB_RUN_ID`` for a link to the run).

Exit status is the run's: 0 pass, 1 regression or alert, 2 bad input, 3 inconclusive
(0 instead when ``fail-on-inconclusive`` is false; the ``exit-code`` output keeps 3),
70 an internal error, 130 interrupted. Failing to post the comment never fails the step:
it becomes a ``::warning::``.
"""
