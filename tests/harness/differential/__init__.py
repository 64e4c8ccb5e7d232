"""The dev cluster measured against Kubernetes, request by request (issue #30, Build item 5).

A corpus of API requests (`corpus/*.yaml`, one file an area) is replayed against both control
planes of a `DevCluster` (`embedded`, `kubernetes`); each answer is reduced to its status code,
reason, normalised message, warnings and normalised stored object (`normalise.py`), and the two
reductions are compared (`report.py`). `python -m tests.harness.differential` runs it and
writes docs/differential.md; tests/devcluster/test_differential_corpus.py fails when a request
that agreed in `baseline.txt` no longer does.
"""
