"""No dead code (issue 39, item 4): every function, class, method and upper-case constant defined
at the top level of a module (or of a class) in capsule/ or ifeval_scorer/ is named somewhere in the
product outside its own definition: capsule/, ifeval_scorer/ (the scorer's public API as its README
documents it), scripts/, benchmarks/, docker/, the Makefile or pyproject.toml. Tests do not count: a
function only a test calls is dead code with a test.

A check by name, not by import graph: two definitions sharing a name keep each other alive, which
errs on the side of keeping code; a false alarm is an entry point reached by a framework, listed in
FRAMEWORK_HOOKS with the reason."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFINED_IN = ("capsule", "ifeval_scorer")
USED_IN = ("capsule", "ifeval_scorer", "scripts", "benchmarks", "docker")
USED_IN_FILES = ("Makefile", "pyproject.toml", "ifeval_scorer/README.md")
FRAMEWORK_HOOKS = {
    "list_commands": "click.Group calls it to list the CLI's commands",
    "get_command": "click.Group calls it to resolve a command name",
}


def _definitions(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, name) of each top-level def/class, each method, and each upper-case constant."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not _registered(node):
                yield node.lineno, node.name
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                method = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                if method and not item.name.startswith("__"):
                    yield item.lineno, item.name
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id.lstrip("_").isupper():
                    yield node.lineno, target.id


def _registered(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """Whether a decorator registers the definition where it is made (a click command or group)."""
    for decorator in node.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(call, ast.Attribute) and call.attr in {"command", "group"}:
            return True
    return False


def _product_names() -> Counter[str]:
    texts = [
        path.read_text(errors="replace")
        for folder in USED_IN
        for path in sorted((REPO / folder).rglob("*"))
        if path.is_file() and path.suffix in {".py", ".sh", ".toml", ""} and "__pycache__" not in path.parts
    ]
    texts += [(REPO / name).read_text() for name in USED_IN_FILES]
    return Counter(re.findall(r"\w+", "\n".join(texts)))


def test_every_definition_is_used_by_the_product() -> None:
    names = _product_names()
    dead = []
    for folder in DEFINED_IN:
        for path in sorted((REPO / folder).rglob("*.py")):
            for line, name in _definitions(ast.parse(path.read_text())):
                if name.startswith("__") or name in FRAMEWORK_HOOKS:
                    continue
                if names[name] <= 1:  # its definition alone
                    dead.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert dead == [], "defined but never used outside tests (remove it, or use it):\n" + "\n".join(dead)
