"""The suffix alphabet Kubernetes uses for generated names.

The API server (``generateName``), KubeRay (replica names) and the operator all draw 5
characters from 27 consonants and digits, with no vowels so that no word is ever spelt.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5


def random_suffix(
    choice: Callable[[str], str] = secrets.choice, length: int = SUFFIX_LENGTH
) -> str:
    """A fresh suffix; ``choice`` is injectable so callers with a seeded RNG stay reproducible."""
    return "".join(choice(SUFFIX_ALPHABET) for _ in range(length))
