"""Public signatures that take or return ``Any`` (issue #50): functions and methods whose names do
not start with ``_``, in public classes, across lmk_rag and the integrations; ``*args: Any`` /
``**kwargs: Any`` (what the frameworks' base classes mandate) do not count. Also counts aliases
that are ``Any`` in disguise (``X | Any``).

    python research/scripts/count_any.py [--list]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["lmk_rag", "integrations/langchain/langchain_lmk", "integrations/llama_index/llama_index"]


def mentions_any(node: ast.AST | None) -> bool:
    if node is None:
        return False
    return any(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Attribute) and n.attr == "Any")
        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "Any" in n.value.replace("AnyStr", ""))
        for n in ast.walk(node)
    )


def signatures(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_") and node.name not in ("__init__", "__call__"):
                    continue
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
                if mentions_any(node.returns) or any(mentions_any(p.annotation) for p in params):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {prefix}{node.name}")

    visit(tree.body, "")
    return found


def main() -> None:
    rows = [s for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) for s in signatures(p)]
    if "--list" in sys.argv:
        print("\n".join(rows))
    print(f"public signatures with Any (outside *args/**kwargs): {len(rows)}")


if __name__ == "__main__":
    main()
