"""CEL validation rules of CRDs and Kubernetes' CEL libraries for them (docs/design.md §8,
"Schemas")."""
