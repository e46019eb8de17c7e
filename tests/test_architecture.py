"""The import graph of the two houses, read with ``ast``: the library (``astarpo/``) and the lab
(``experiments/``): no cycles, no private names across modules, the library never imports the
lab, and ``import astarpo`` stays light (no transformers, no vLLM)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "astarpo"
LAB = ROOT.parent / "experiments"

# Subpackages of astarpo.llm from the bottom up: a module may import only from its own
# subpackage or from one listed before it (and from astarpo's core modules).
LAYERS = [
    "parallel",
    "models",
    "data",
    "rewards",
    "rollout",
    "stage1",
    "algorithms",
    "training",
    "eval",
    "toy",
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(house: Path = ROOT) -> dict[str, Path]:
    """The modules of one house (the lab's tests left out)."""
    return {_module_name(p): p for p in house.rglob("*.py") if "tests" not in p.parts}


def _both() -> dict[str, Path]:
    return {**_modules(ROOT), **_modules(LAB)}


def _imports(path: Path, name: str) -> list[tuple[str, list[str], int]]:
    """``(module imported, names imported from it, line)`` of every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the astarpo modules it imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for mod, names, _ in _imports(path, name):
            if not mod.startswith(("astarpo", "experiments")):
                continue
            for n in names:
                if f"{mod}.{n}" in modules:
                    deps.add(f"{mod}.{n}")
            if mod in modules:
                deps.add(mod)
        graph[name] = deps - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a list of modules, or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_no_import_cycles() -> None:
    cycle = find_cycle(_graph(_both()))
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_no_private_names_imported_across_modules() -> None:
    bad = []
    for name, path in _both().items():
        for mod, names, line in _imports(path, name):
            if mod.startswith(("astarpo", "experiments")) and mod != name:
                bad += [
                    f"{path}:{line}: {n} from {mod}"
                    for n in names
                    if n.startswith("_") and not n.startswith("__")
                ]
    assert not bad, "private names imported from other modules:\n" + "\n".join(bad)


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "llm":
        return None
    return LAYERS.index(parts[2]) if parts[2] in LAYERS else None


def test_llm_dependencies_point_one_way() -> None:
    bad = []
    for name, deps in _graph(_modules()).items():
        own = _layer(name)
        if own is None:
            if name.startswith("astarpo.llm"):
                assert name in ("astarpo.llm",), f"{name} is outside the layers {LAYERS}"
            continue
        for dep in deps:
            layer = _layer(dep)
            if layer is not None and layer > own:
                bad.append(f"{name} imports {dep} (a higher layer)")
            if dep.startswith("astarpo.commands") or dep.startswith("astarpo.theory"):
                bad.append(f"{name} imports {dep}")
    assert not bad, "\n".join(bad)


def test_the_library_never_imports_the_lab() -> None:
    bad = [
        f"{path}:{line}: imports {mod}"
        for name, path in _modules(ROOT).items()
        for mod, _, line in _imports(path, name)
        if mod == "experiments" or mod.startswith("experiments.")
    ]
    assert not bad, "\n".join(bad)


def _study(module: str) -> str | None:
    """The subpackage of ``experiments`` a module belongs to (``harness``, a study's name,
    ``registry``), or None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "experiments" else None


def _studies() -> set[str]:
    """The study subpackages of the lab (those the registry names)."""
    from experiments.registry import STUDIES

    return {s.package.split(".")[-1] for s in STUDIES.values()}


def study_violations(graph: dict[str, set[str]], studies: set[str]) -> list[str]:
    """The imports of ``graph`` by which a study reaches another subpackage of the lab than the
    harness and itself (a study shares through the harness or through files on disk)."""
    bad = []
    for name, deps in sorted(graph.items()):
        own = _study(name)
        if own not in studies:  # the harness, the registry, benchmarks, theory_claims
            continue
        bad += [
            f"{name} imports {dep}"
            for dep in sorted(deps)
            if _study(dep) is not None and _study(dep) not in ("harness", own)
        ]
    return bad


def test_a_study_imports_only_the_harness_and_itself() -> None:
    assert study_violations(_graph(_modules(LAB)), _studies()) == []
    planted = {"experiments.refresh.run": {"experiments.ladder.run", "experiments.harness.x"}}
    assert study_violations(planted, {"refresh", "ladder"}) == [
        "experiments.refresh.run imports experiments.ladder.run"
    ]
    assert _study("experiments.harness.runner") == "harness" and _study("astarpo.x") is None


#: The packages whose exported names (``__all__``) the lab may import.
PUBLIC = ("astarpo", "astarpo.llm", "astarpo.theory", "astarpo.analysis")


def lab_violations(imports: list[tuple[str, list[str], str]]) -> list[str]:
    """Of ``(module imported, names imported from it, where)``, the imports of the library
    that are not ``from P import X`` with ``P`` one of :data:`PUBLIC` and ``X`` in its
    ``__all__`` (or a plain ``import astarpo``)."""
    import importlib

    exported = {p: set(importlib.import_module(p).__all__) for p in PUBLIC}
    bad = []
    for mod, names, where in imports:
        if mod != "astarpo" and not mod.startswith("astarpo."):
            continue
        if not names:
            if mod != "astarpo":
                bad.append(f"{where}: import {mod} (import names from {', '.join(PUBLIC)})")
            continue
        if mod not in exported:
            bad.append(f"{where}: from {mod} import {', '.join(names)} (not a public package)")
            continue
        bad += [f"{where}: {n} is not in {mod}.__all__" for n in names if n not in exported[mod]]
    return bad


def test_the_lab_imports_only_names_the_library_exports() -> None:
    found = [
        (mod, names, f"{path.relative_to(LAB.parent)}:{line}")
        for name, path in _modules(LAB).items()
        for mod, names, line in _imports(path, name)
    ]
    assert lab_violations(found) == []
    planted = [
        ("astarpo.llm.stage1.table", ["ValueTable"], "a.py:1"),
        ("astarpo.llm", ["check_choice"], "a.py:2"),
        ("astarpo.llm.rewards", [], "a.py:3"),
        ("astarpo.llm", ["ValueTable"], "a.py:4"),
        ("astarpo", [], "a.py:5"),
        ("numpy", [], "a.py:6"),
    ]
    assert lab_violations(planted) == [
        "a.py:1: from astarpo.llm.stage1.table import ValueTable (not a public package)",
        "a.py:2: check_choice is not in astarpo.llm.__all__",
        "a.py:3: import astarpo.llm.rewards (import names from astarpo, astarpo.llm, "
        "astarpo.theory, astarpo.analysis)",
    ]


def test_every_exported_name_is_a_documented_public_api() -> None:
    """Each name the public packages export resolves and has a docstring of its own (a class or
    function) or a ``#:`` comment in its module (a constant)."""
    import importlib
    import inspect

    bad = []
    for package in PUBLIC:
        module = importlib.import_module(package)
        for name in module.__all__:
            if name == "__version__":
                continue
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                if not (obj.__doc__ or "").strip():
                    bad.append(f"{package}.{name}: no docstring")
                continue
            owner = next((m for m in _defining_modules(package) if f"\n{name}" in _source(m)), None)
            if owner is None or not _commented(_source(owner), name):
                bad.append(f"{package}.{name}: a constant without a #: comment where defined")
    assert not bad, "\n".join(bad)


def _defining_modules(package: str) -> list[str]:
    return [n for n in _modules() if n == package or n.startswith(f"{package}.")]


def _source(module: str) -> str:
    return "\n" + _modules()[module].read_text()


def _commented(text: str, name: str) -> bool:
    """Whether the module-level assignment of ``name`` in ``text`` follows a ``#:`` comment or
    has a docstring (a string statement) right after it."""
    tree = ast.parse(text)
    lines = text.splitlines()
    for i, node in enumerate(tree.body):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            after = tree.body[i + 1] if i + 1 < len(tree.body) else None
            doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            return above.startswith("#:") or doc
    return False


def test_nothing_in_the_library_imports_the_integrations() -> None:
    """``astarpo.integrations`` (verl, TRL) sits above the library: it imports the library, and
    no module outside it imports it (so ``import astarpo`` never loads verl or TRL)."""
    bad = [
        f"{name} imports {dep}"
        for name, deps in _graph(_modules()).items()
        if not name.startswith("astarpo.integrations")
        for dep in deps
        if dep.startswith("astarpo.integrations")
    ]
    assert not bad, "\n".join(bad)


def test_core_does_not_import_llm_or_theory() -> None:
    for core in ("astarpo.objective", "astarpo.oracle", "astarpo"):
        deps = _graph(_modules())[core]
        assert not [d for d in deps if d.startswith(("astarpo.llm", "astarpo.theory"))], core


@pytest.mark.parametrize("module", ["astarpo", "astarpo.llm", "astarpo.integrations"])
def test_import_is_light(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "heavy = [m for m in ('transformers', 'vllm', 'peft', 'matplotlib', 'trl', 'verl') "
        "if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"


def test_modules_and_functions_are_short() -> None:
    """~350 lines per module and ~80 per function (docstring excluded), except the listed,
    justified ones."""
    allowed_functions = {
        "astarpo.llm.training.trainer.step": "one Stage 2 step, read top to bottom in 5 phases",
        "astarpo.llm.stage1.estimate.estimate_values": "Stage 1's batch loop with resume checks",
        "experiments.benchmarks.gpu_step_cost.child": "one measured child process of the GPU "
        "benchmark, read top to bottom",
    }
    allowed_modules = {
        "astarpo.llm.training.trainer": "the Stage 2 loop read top to bottom (< 400 lines); its "
        "argument handling is in training.inputs, its checks in training.guards and "
        "training.run_dir, its updates in training.update, the saved model folder in "
        "training.final_model, the stop signals in training.preemption",
        "experiments.theory_claims.fill_page": "the page template's namespace: the helpers its "
        "expressions call, evaluated against the experiments' JSON",
    }
    long_modules = []
    long_functions = []
    for name, path in _both().items():
        text = path.read_text()
        if len(text.splitlines()) > 360 and name not in allowed_modules:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                doc = node.body[0] if node.body else None
                if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                    length -= (doc.end_lineno or doc.lineno) - doc.lineno + 1  # the docstring
                if length > 85 and f"{name}.{node.name}" not in allowed_functions:
                    long_functions.append(f"{name}.{node.name}: {length} lines")
    assert not long_modules, long_modules
    assert not long_functions, long_functions
