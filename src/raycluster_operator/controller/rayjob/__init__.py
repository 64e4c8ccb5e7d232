"""RayJobs on the generic runtime (docs/design.md §11): the reconciler, which is also the
kind's registration, the Jobs API client and their metrics."""
