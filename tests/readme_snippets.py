"""The README's code blocks, by section, so tests (and the wheel check) run them as written.

python tests/readme_snippets.py "Quick start"      # the section's Python blocks, one script
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Snippet:
    section: str  # the "## " heading above it
    language: str  # python, bash, ...
    code: str
    line: int  # where the block starts in the README


def snippets(path: Path = README) -> list[Snippet]:
    """Every fenced block, with the section it sits in."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()]
        headings = re.findall(r"^## (.+)$", before, re.M)
        found.append(
            Snippet(
                section=headings[-1].strip() if headings else "",
                language=match.group(1),
                code=match.group(2),
                line=before.count("\n") + 1,
            )
        )
    return found


def section_script(section: str, path: Path = README) -> str:
    """The Python blocks of one section, joined in order."""
    blocks = [s.code for s in snippets(path) if s.section == section and s.language == "python"]
    if not blocks:
        raise SystemExit(f"no python block under '## {section}' in {path}")
    return "\n".join(blocks)


if __name__ == "__main__":
    print(section_script(sys.argv[1]))
