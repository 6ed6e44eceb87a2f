"""The endpoint edge: one provider's requests with honest timing, caps, retries and concurrency.

Each attempt becomes an ``Envelope``; requests' exceptions are turned into envelopes at
this edge so the core never sees a socket. Retries happen only for transport failures
(drop, empty, a stream the server cut), with a per-case and a per-run budget; a 429 pauses
the whole run instead, using neither, and the run's total wait on 429s has its own cap. 429s
also lower how many requests the run has in flight, and answers raise it back to --concurrency.
Attempts are graded only to label the attempt log and the progress line; the report grades
the envelopes again on its own.

Modules: ``http`` (one attempt), ``reading`` (one response under the deadline and the size
cap), ``retry_after`` (the one Retry-After parser), ``retry`` (whether and when to try
again), ``adaptive`` (the run's concurrency limit), ``pool`` (the worker pool), ``progress``,
``interrupts``, and ``live`` (the entry point the runner calls).
"""
