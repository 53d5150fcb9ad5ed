"""The packages stay layered one way (experiments -> sim -> assignors), their modules import
each other without cycles, and no module imports another module's private (underscore) name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGES = ("assignors", "sim", "experiments")
# A package may import only the packages after it here.
LAYERS = {"experiments": {"sim", "assignors"}, "sim": {"assignors"}, "assignors": set()}


def _modules() -> dict[str, Path]:
    """Every module of the three packages by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) for every import in the module,
    relative imports resolved; imports under ``if TYPE_CHECKING:`` included."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:  # ``from pkg import module``
                    out.append((submodule, None, node.lineno))
                else:
                    out.append((source, alias.name, node.lineno))
    return out


def _own(module: str) -> str | None:
    """The module of ours that ``module`` names (itself or a package above it), else None."""
    while module:
        if module in MODULES:
            return module
        module = module.rpartition(".")[0]
    return None


def test_packages_import_only_the_layers_below():
    """assignors imports neither sim nor experiments; sim does not import experiments."""
    wrong = []
    for name, path in MODULES.items():
        top = name.split(".")[0]
        for imported, _, line in _imports(name, path):
            other = imported.split(".")[0]
            if other in PACKAGES and other != top and other not in LAYERS[top]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_is_imported_from_another_module():
    """``from x import _name`` is refused: a name that two modules use is public (no leading
    underscore), in the module that owns it."""
    wrong = []
    for name, path in MODULES.items():
        for imported, taken, line in _imports(name, path):
            if (
                _own(imported) is not None
                and taken
                and taken.startswith("_")
                and not taken.startswith("__")
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {taken} from {imported}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_modules():
    """The modules' import graph (deferred imports inside functions included) has no cycle."""
    graph = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for imported, _, _ in _imports(name, path):
            target = _own(imported)
            # a module importing its own package's __init__ (``from . import x``) is not an edge
            if target is not None and target != name and not name.startswith(target + "."):
                graph[name].add(target)
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(cycles)


# What a declaration may not import: plotting and table libraries, and the report's building
# blocks (its page is a recipe in experiments.report, which it names).
NOT_IN_CATALOG = ("matplotlib", "pandas", "experiments.report.plots", "experiments.report.html")


def test_catalog_holds_declarations_only():
    """``experiments/catalog/`` declares grids, scales and which recipe renders each page: it
    draws nothing and builds no table itself, and no report module imports a declaration (the
    recipes get the scales as data), so the two stay one way: catalog -> report."""
    wrong = []
    for name, path in MODULES.items():
        for imported, taken, line in _imports(name, path):
            full = f"{imported}.{taken}" if taken else imported
            if name.startswith("experiments.catalog") and any(
                full == banned or full.startswith(banned + ".") for banned in NOT_IN_CATALOG
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {full}")
            if name.startswith("experiments.report") and (_own(imported) or "").startswith(
                "experiments.catalog"
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not wrong, "\n".join(wrong)
