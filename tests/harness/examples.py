"""Where the repository's user-facing files are, and loading them as a user's kubectl would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEPLOY = ROOT / "deploy"


def example(name: str) -> Path:
    """examples/NAME (``name`` with or without ``.yaml``)."""
    return EXAMPLES / (name if name.endswith(".yaml") else f"{name}.yaml")


def load_example(name: str) -> list[dict[str, Any]]:
    """The YAML documents of examples/NAME, empty documents skipped."""
    return [doc for doc in yaml.safe_load_all(example(name).read_text()) if doc]


README = ROOT / "README.md"


def readme_block(heading: str, fence: str = "sh") -> str:
    """The first ```FENCE block after the README line ``heading``: what a user copies."""
    text = README.read_text()
    block = text[text.index(heading) :]
    opening = f"```{fence}\n"
    block = block[block.index(opening) + len(opening) :]
    return block[: block.index("```")]
