"""No import cycle in dicelab, counting imports inside functions and under `TYPE_CHECKING`.

The graph is grimp's (what import-linter checks the layers with): every `import` statement of every dicelab
module, wherever it stands. Checked three ways: among modules, among the sibling sub-packages and modules of
every package, and no module importing a package `__init__` it belongs to (an `__init__` re-exports its
submodules, so that import is a cycle waiting to happen; the root `dicelab`, which imports nothing of
dicelab, is the exception). An import by name (`importlib.import_module`, how `dicelab.cli.dispatch` runs a
sub-command) is not a static import and not counted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

import grimp
import pytest

Graph = Mapping[str, Iterable[str]]


def cycles(graph: Graph) -> list[list[str]]:
    """Every cycle's strongly connected component (Tarjan, iterative), each sorted, sorted by first name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
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
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def cycle_path(graph: Graph, component: list[str]) -> list[str]:
    """One shortest cycle through the component's first member, as `a -> b -> ... -> a`."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph.get(node, ())):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if target in members and target not in previous:
                previous[target] = node
                queue.append(target)
    raise AssertionError(f"{component} is not a cycle")


def describe(graph: Graph, found: list[list[str]]) -> str:
    return "; ".join(" -> ".join(cycle_path(graph, component)) for component in found)


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    graph = grimp.build_graph("dicelab", cache_dir=None)
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def test_the_cycle_finder_finds_cycles_and_names_them() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"], ["e"]]
    assert describe(graph, cycles(graph)) == "a -> b -> c -> a; e -> e"
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_counts_imports_inside_functions(imports: dict[str, set[str]]) -> None:
    # `dicelab validate` imports the experiment loader inside `run`, so that `--help` stays light.
    assert "dicelab.experiment" in imports["dicelab.cli.validate"]


def test_no_cycle_among_modules(imports: dict[str, set[str]]) -> None:
    found = cycles(imports)
    assert not found, f"import cycles among modules: {describe(imports, found)}"


def packages(modules: Iterable[str]) -> set[str]:
    return {module.rsplit(".", 1)[0] for module in modules if "." in module}


def siblings_graph(imports: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The package's children (modules and sub-packages, each with everything under it) and their imports."""
    prefix = f"{package}."

    def child(module: str) -> str | None:
        if not module.startswith(prefix):
            return None
        return prefix + module[len(prefix) :].split(".", 1)[0]

    graph: dict[str, set[str]] = {}
    for importer, targets in imports.items():
        source = child(importer)
        if source is None:
            continue
        graph.setdefault(source, set())
        for target in targets:
            destination = child(target)
            if destination is not None and destination != source:
                graph[source].add(destination)
    return graph


def test_no_cycle_among_sibling_packages(imports: dict[str, set[str]]) -> None:
    broken = {}
    for package in sorted(packages(imports)):
        graph = siblings_graph(imports, package)
        if found := cycles(graph):
            broken[package] = describe(graph, found)
    assert not broken, "import cycles among the children of " + "; ".join(
        f"{package}: {cycle}" for package, cycle in broken.items()
    )


def test_no_module_imports_a_package_it_belongs_to(imports: dict[str, set[str]]) -> None:
    def imports_inside(package: str) -> bool:
        return any(target.startswith(f"{package}.") for target in imports[package])

    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in imports.items()
        for target in targets
        if module.startswith(f"{target}.") and imports_inside(target)
    )
    assert not wrong, f"import the defining module instead of the package: {', '.join(wrong)}"
    assert not imports_inside("dicelab"), "the root package must import nothing of dicelab"
