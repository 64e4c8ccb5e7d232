"""Kept import path: `eventually` lives in harness/waiting.py."""

from harness.waiting import eventually

__all__ = ["eventually"]
