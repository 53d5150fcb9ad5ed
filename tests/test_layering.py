"""The packages stay layered one way (cli -> lab -> sim -> assignors; the command may import
sim too), their modules import
each other without cycles, and no module imports another module's private (underscore) name or
another package's private module. Inside ``sim``, the client and the coordinator never import
each other, and the kernel imports nothing but itself (docs/design.md, "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
# The import roots scanned: the simulator and the assignors are top-level packages (users' scripts
# import them); the product wing is one package holding the command and the lab.
PACKAGES = ("assignors", "sim", "rebalance_sim")
# The layers, by module prefix, and what each may import besides itself.
LAYERS = {
    "rebalance_sim.cli": {"rebalance_sim.lab", "sim", "assignors"},
    "rebalance_sim.lab": {"sim", "assignors"},
    "sim": {"assignors"},
    "assignors": set(),
}


def _layer(module: str) -> str | None:
    """The layer a module of ours belongs to (``rebalance_sim`` itself and its ``__main__`` are
    the command's entry, which belongs to the command)."""
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            return layer
    if module.split(".")[0] == "rebalance_sim":
        return "rebalance_sim.cli"
    return None


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
    """assignors imports none of the others; sim imports neither the lab nor the command; the lab
    does not import the command."""
    wrong = []
    for name, path in MODULES.items():
        layer = _layer(name)
        assert layer is not None, name
        for imported, _, line in _imports(name, path):
            target = _own(imported)
            other = _layer(target) if target is not None else None
            if other is not None and other != layer and other not in LAYERS[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_the_layers_are_what_the_tree_holds():
    """Every module of ours is in one of the layers, and each layer has modules (a renamed
    package would otherwise leave a rule checking nothing)."""
    assert {_layer(name) for name in MODULES} == set(LAYERS)


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
# blocks (its page is a recipe in rebalance_sim.lab.report, which it names).
NOT_IN_CATALOG = (
    "matplotlib",
    "pandas",
    "rebalance_sim.lab.report.plots",
    "rebalance_sim.lab.report.html",
)


def test_catalog_holds_declarations_only():
    """``rebalance_sim/lab/catalog/`` declares grids, scales and which recipe renders each page: it
    draws nothing and builds no table itself, and no report module imports a declaration (the
    recipes get the scales as data), so the two stay one way: catalog -> report."""
    wrong = []
    for name, path in MODULES.items():
        for imported, taken, line in _imports(name, path):
            full = f"{imported}.{taken}" if taken else imported
            if name.startswith("rebalance_sim.lab.catalog") and any(
                full == banned or full.startswith(banned + ".") for banned in NOT_IN_CATALOG
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {full}")
            if name.startswith("rebalance_sim.lab.report") and (_own(imported) or "").startswith(
                "rebalance_sim.lab.catalog"
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not wrong, "\n".join(wrong)


def _room(module: str) -> str:
    """The room of ``sim`` a module is in (``sim.client.base`` -> ``sim.client``), or the module
    itself for one at the top of ``sim`` or outside it."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "sim" and len(parts) > 2 else module


def _imports_of_room(room: str):
    """(importing module, its path, module of ours it imports, line) for every import made in
    ``room``."""
    for name, path in MODULES.items():
        if name == room or name.startswith(room + "."):
            for imported, _, line in _imports(name, path):
                target = _own(imported)
                if target is not None:
                    yield name, path, target, line


def test_the_client_and_the_coordinator_never_import_each_other():
    """``sim/client`` and ``sim/coordinator`` are the two sides of the wire (Kafka's ``clients``
    and ``group-coordinator`` modules): they share only what lies below them (``sim.wire``,
    ``sim.kernel``, ``sim.config``, ``sim.errors``) and neither imports the other."""
    wrong = []
    for this, other in (("sim.client", "sim.coordinator"), ("sim.coordinator", "sim.client")):
        for _, path, target, line in _imports_of_room(this):
            if _room(target) == other:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_kernel_knows_actors_and_time_only():
    """``sim/kernel`` imports nothing of Kafka nor of the world around it (no wire, coordinator,
    client, network or recorder): only its own modules and the build switch (``sim.compiled``)."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for _, path, target, line in _imports_of_room("sim.kernel")
        if _room(target) != "sim.kernel" and target != "sim.compiled"
    ]
    assert not wrong, "\n".join(wrong)


def test_no_private_module_of_another_package_is_imported():
    """A module whose name (or a package's on its path) starts with an underscore is private to
    the package that holds it: ``from assignors._java import ...`` from ``sim`` is refused (the
    package gives what others need a public face, ``assignors.java``)."""
    wrong = []
    for name, path in MODULES.items():
        for imported, _, line in _imports(name, path):
            target = _own(imported)
            if target is None:
                continue
            parts = target.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])  # the package the private module belongs to
                    if not (name == owner or name.startswith(owner + ".")):
                        wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
                    break
    assert not wrong, "\n".join(wrong)


def test_no_private_name_of_another_module_is_read_through_it():
    """``module._name`` (a module imported whole, then a private name read from it) is refused
    like ``from module import _name``."""
    wrong = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        aliases: dict[str, str] = {}  # local name -> module of ours it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and _own(alias.name) == alias.name:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    if f"{source}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
        wrong += [
            f"{path.relative_to(ROOT)}:{node.lineno} reads {node.attr} of {aliases[node.value.id]}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and aliases[node.value.id] != name
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ]
    assert not wrong, "\n".join(wrong)
