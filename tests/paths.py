"""Where the tests find the repository and their resources (one definition)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESOURCES = REPO / "tests" / "resources"
