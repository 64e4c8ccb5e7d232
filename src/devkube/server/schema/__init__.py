"""How the dev API server reads a body against its kind's schema: structural schemas of CRDs and
their CEL rules, built-in kinds' OpenAPI types, protobuf bodies (docs/design.md §8, "Schemas")."""
