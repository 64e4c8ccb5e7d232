"""accelerators layer."""
