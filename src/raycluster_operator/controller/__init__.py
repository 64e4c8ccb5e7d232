"""controller layer: the I/O that carries plans out as API calls (docs/design.md §7).

``runtime/`` is the generic runtime (informers, work queue, rate limits, one ``Controller``,
leader election, metrics, Events); each kind is a package of reconcilers on it
(``raycluster/``, ``rayjob/``); ``manager`` composes them with serving, and ``install`` holds
the operator's own RBAC and Deployment.
"""
