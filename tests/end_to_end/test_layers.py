"""The project's layers, read from the source with :mod:`ast` (nothing is imported).

Every package is imported under one name, ``skewlab`` (``skewlab.engine`` is the folder engine/, and
so on; pyproject.toml's package-dir).  From the bottom up: ``skewlab.shared`` (imports nothing of the
project), ``storage``, ``engine``, then ``dashboard`` and ``bench``, and on top the composition root
``skewlab.cli``, which may import everything.  Inside the engine, from the bottom up: ``config``,
``algorithms`` and ``workloads``, ``control``, ``io`` and ``runtimes``, ``cli``.  Every ``import``
statement counts, also those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: folder -> the import name it is installed under
PACKAGES = {"skewlab": "skewlab", "shared": "skewlab.shared", "storage": "skewlab.storage",
            "engine": "skewlab.engine", "dashboard": "skewlab.dashboard", "bench": "skewlab.bench"}
#: the engine's layers, bottom up: a module may import its own layer and the ones below
ENGINE_LAYERS = {"config": 0, "algorithms": 1, "workloads": 1, "operators": 1, "control": 2, "io": 3, "runtimes": 3, "cli": 4}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGES[parts[0]], *parts[1:]])


def _modules() -> dict[str, Path]:
    """Every module of the project's packages: dotted name -> file."""
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imported_names(name: str, path: Path, modules: set[str]) -> set[str]:
    """The dotted names a module imports.  ``from a.b import c`` yields ``a.b.c`` when that is a module
    (importing a submodule runs its package's ``__init__`` too, as every submodule import does, so
    that is not counted as a dependency on the package), else ``a.b``."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                out.add(f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in modules else mod)
    return out


def _graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a name that is an attribute maps to its module)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imported_names(name, path, set(modules)):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _top(name: str) -> str:
    """The layer of a module: engine, storage, dashboard, bench, or skewlab's own cli / shared."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _engine_layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if parts[:2] == ["skewlab", "engine"] and len(parts) > 2 else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _violations(layer: str, forbidden: set[str]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, ts in _graph().items() if _top(m) == layer
                  for t in ts if _top(t) in forbidden)


def test_the_module_graph_is_read():
    graph = _graph()
    assert "skewlab.engine.cli" in graph and "skewlab.cli" in graph and "skewlab.shared" in graph
    assert "skewlab.engine.config.params" in graph["skewlab.engine.cli"]
    # `from dashboard import figures` depends on the submodule, not on the package's __init__
    assert "skewlab.dashboard.figures" in graph["skewlab.dashboard.app"] and "dashboard" not in graph["skewlab.dashboard.app"]
    assert {"skewlab.engine.cli", "skewlab.dashboard.commands", "skewlab.bench.cli"} <= graph["skewlab.cli"]


def test_engine_imports_neither_dashboard_nor_bench():
    assert _violations("engine", {"dashboard", "bench"}) == []
    assert not [m for m, ts in _graph().items() if _top(m) == "engine" and "skewlab.cli" in ts]


def test_engine_layers_import_only_downwards():
    graph = _graph()
    assert {_engine_layer(m) for m in graph} - {None} == set(ENGINE_LAYERS), "a folder of engine/ has no layer"
    upward = sorted(f"{m} imports {t}" for m, ts in graph.items() if _engine_layer(m)
                    for t in ts if _engine_layer(t) and ENGINE_LAYERS[_engine_layer(t)] > ENGINE_LAYERS[_engine_layer(m)])
    assert upward == []


def test_the_engine_layer_check_sees_an_upward_import():
    assert _engine_layer("skewlab.engine.control.controller") == "control"
    assert _engine_layer("skewlab.engine") is None and _engine_layer("skewlab.storage.store") is None
    assert ENGINE_LAYERS["runtimes"] > ENGINE_LAYERS["control"] > ENGINE_LAYERS["algorithms"] > ENGINE_LAYERS["config"]


def test_the_shadow_evaluator_depends_on_no_runtime():
    graph = _graph()
    assert "skewlab.engine.algorithms.source_routing" in graph["skewlab.engine.control.shadow"]
    assert not [t for t in graph["skewlab.engine.control.shadow"] if t.startswith(("skewlab.engine.runtimes", "skewlab.engine.runtimes.spark"))]


def test_storage_imports_no_upper_layer():
    assert _violations("storage", {"engine", "dashboard", "bench"}) == []
    assert not [m for m, ts in _graph().items() if _top(m) == "storage" and "skewlab.cli" in ts]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def _folder(name: str) -> str:
    """The folder a module lives in, as a reader sees the tree: a top-level folder, or one of the
    engine's own (engine/control, …)."""
    layer = _engine_layer(name)
    if layer:
        return f"engine/{layer}"
    inverse = {import_name: folder for folder, import_name in PACKAGES.items()}
    parts = name.split(".")
    return next((inverse[".".join(parts[:i])] for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in inverse),
                name)


def test_no_import_cycles_between_folders():
    folders: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        folders.setdefault(_folder(module), set()).update(_folder(t) for t in targets if _folder(t) != _folder(module))
    for targets in list(folders.values()):
        for t in targets:
            folders.setdefault(t, set())
    assert _folder("skewlab.engine.control.controller") == "engine/control"
    assert _folder("skewlab.shared") == "shared" and _folder("skewlab.cli") == "skewlab"
    assert _cycles(folders) == []
    assert not [f for f, ts in folders.items() if "skewlab" in ts], "nothing imports the composition root"


def test_shared_module_imports_nothing_of_the_project():
    assert _graph()["skewlab.shared"] == set()
    assert _graph()["skewlab"] == set()


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_pyproject_lists_every_package_and_ships_the_assets():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {_module_name(p.parent / "__init__.py") for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")}
    assert folders | {"skewlab.assets"} == set(meta["packages"])
    assert meta["package-dir"] == {**{name: folder for folder, name in PACKAGES.items()}, "skewlab.assets": "assets"}
    assert meta["package-data"] == {"skewlab.assets": ["*"]}
    assert (ROOT / "assets" / "style.css").is_file() and not (ROOT / "dashboard" / "assets").exists()


def test_dashboard_serves_the_top_level_assets_folder():
    from skewlab.dashboard.app import assets_folder

    assert Path(assets_folder()) == ROOT / "assets"
