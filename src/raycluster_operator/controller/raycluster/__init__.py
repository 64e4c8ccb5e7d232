"""RayClusters on the generic runtime (docs/design.md §7): their sources, the executor of a
plan (``reconciler``), the records it keeps between passes (expectations, refusal holds, the
installed CRD) and their metrics; ``registration`` plugs them into the runtime."""
