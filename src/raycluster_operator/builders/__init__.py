"""builders layer."""
