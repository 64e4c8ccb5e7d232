"""The generic controller runtime, as controller-runtime draws it (docs/design.md §7).

Nothing here knows a kind: informers and their caches (``informer``, ``store``), the work
queue and rate limits (``workqueue``, ``ratelimit``), one ``Controller`` that runs any
``Registration`` and its ``Reconciler`` (``controller``, ``reconcile``), bounded writes
(``writer``), Events (``events``), leader election, metrics, probes and logging (``leader``,
``metrics``, ``probes``, ``serving``, ``logs``). An import-linter contract keeps the kinds
out (pyproject.toml).
"""
