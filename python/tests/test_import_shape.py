"""The package's shape: no import circles, between modules or between packages.

Every `import` and `from ... import` of a cachelab module counts, wherever it is written
(in a function, under `if TYPE_CHECKING:`): a lazy or type-only import hides a circle
from Python but not from a reader. `from cachelab.x import y` is an import of the module
`cachelab.x.y` when that is a module, else of `cachelab.x` (its `__init__`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import cachelab

PACKAGE_DIR = Path(cachelab.__file__).parent


def modules(root: Path, name: str = "cachelab") -> dict[str, Path]:
    """Every module under the package directory `root`, by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(mods: Mapping[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other modules of the package."""
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets.update(resolve(f"{base}.{a.name}") for a in node.names)
        edges[mod] = {t for t in targets if t is not None and t != mod}
    return edges


def packages(edges: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The same graph between the root package's direct children (a subpackage with everything
    in it, or a top-level module); imports inside one child are left out."""
    def child(mod: str) -> str:
        parts = mod.split(".")
        return ".".join(parts[:2])

    out: dict[str, set[str]] = {}
    for mod, targets in edges.items():
        out.setdefault(child(mod), set()).update(
            child(t) for t in targets if child(t) != child(mod))
    return out


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_module_imports_itself_back():
    assert circles(imports(modules(PACKAGE_DIR))) == []


def test_no_package_imports_itself_back():
    assert circles(packages(imports(modules(PACKAGE_DIR)))) == []


#: The packages in the order of cachelab/__init__.py's docstring: each imports only the
#: ones before it, and the shared root modules.
LAYERS = ("spec", "analysis", "readers", "hosts", "store", "run", "report", "commands")
SHARED = {"cachelab", "cachelab.errors", "cachelab.paths"}


def test_each_package_imports_only_the_layers_before_it():
    graph = packages(imports(modules(PACKAGE_DIR)))
    for i, layer in enumerate(LAYERS):
        allowed = SHARED | {f"cachelab.{before}" for before in LAYERS[:i]}
        assert graph[f"cachelab.{layer}"] <= allowed, layer


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_circle_through_a_lazy_import_is_found(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from pkg.a import x\n",
        "c.py": "import pkg.a\n",
    })
    edges = imports(modules(root, "pkg"))
    assert edges["pkg.c"] == {"pkg.a"}
    assert circles(edges) == [["pkg.a", "pkg.b"]]


def test_a_circle_between_packages_is_found_and_relative_imports_resolve(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "",
        "x/__init__.py": "",
        "x/one.py": "from ..y import two\n",
        "y/__init__.py": "",
        "y/two.py": "from . import three\n",
        "y/three.py": "from pkg.x.one import thing\n",
    })
    edges = imports(modules(root, "pkg"))
    assert edges["pkg.y.two"] == {"pkg.y.three"}
    assert circles(edges) == [["pkg.x.one", "pkg.y.three", "pkg.y.two"]]
    assert circles(packages(edges)) == [["pkg.x", "pkg.y"]]


def test_a_type_only_import_counts(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.b import B\n",
        "b.py": ("from typing import TYPE_CHECKING\n"
                 "if TYPE_CHECKING:\n    from pkg.a import A\n"),
    })
    assert circles(imports(modules(root, "pkg"))) == [["pkg.a", "pkg.b"]]
