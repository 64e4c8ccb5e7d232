"""What every dev-cluster controller is built from: the HTTPS client, watched caches, the
map of served kinds, label selectors and the pass loop (docs/design.md §8)."""
