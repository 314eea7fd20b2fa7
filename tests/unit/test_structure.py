"""The shape of the code: systems are plug-ins the core never names, imports form no circle (lazy imports and
imports for type checking included: a circle broken by importing late is still one), no module is past the size
one reader takes in at once, the Airflow side and the benchmarks in bench/ reach the measurement library only
through its public API, and DAG parsing stays light."""

from __future__ import annotations

import ast
import graphlib
import importlib
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

import bench_tasks

REPO = Path(__file__).resolve().parents[2]
CORE = [
    p
    for folder in ("bench_tasks", "spark_jobs", "plugins", "dags", "expectations")
    for p in sorted((REPO / folder).rglob("*.py"))
    if "systems" not in p.relative_to(REPO).parts
]
SYSTEM_WORD = re.compile(r"kafka|nats|jetstream|rabbit|redis|valkey|pulsar", re.I)
PACKAGES = ("bench_tasks", "spark_jobs", "plugins", "expectations")
MAX_LINES = 500


def _parse(source: str) -> ast.Module:
    """`ast.parse`, tried again if CPython 3.11's AST constructor reports "recursion depth mismatch" for a correct
    file. Its depth counter lives in state the whole process shares, and threaded programs see the error
    spuriously (python/cpython#106905 and reports like it); it failed this test once in a parallel run, in a
    worker whose Spark session keeps py4j's threads running. A real syntax error still fails as one."""
    try:
        return ast.parse(source)
    except SystemError as exc:
        if "recursion depth mismatch" not in str(exc):
            raise
        return ast.parse(source)


def _code_tokens(path: Path) -> list[tuple[int, str]]:
    """Names and string literals, without comments and docstrings (prose may give a system as an example)."""
    source = path.read_text()
    docstrings = {
        node.body[0].value.lineno
        for node in ast.walk(_parse(source))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    kept = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME or (tok.type == tokenize.STRING and tok.start[0] not in docstrings):
            kept.append((tok.start[0], tok.string))
    return kept


def test_the_core_never_names_a_system() -> None:
    """Only `bench_tasks/systems/<name>/` knows a system; adding one touches its package and the registry line."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {text[:60]}"
        for path in CORE
        for line, text in _code_tokens(path)
        if SYSTEM_WORD.search(text)
    ]
    assert not found, "system names outside bench_tasks/systems:\n" + "\n".join(found)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules that `name` imports, anywhere in it (`from .x import y` names module `.x.y` when
    that is a module, else `.x`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(_parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            candidates = [[f"{base}.{alias.name}", base] for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [[alias.name] for alias in node.names]
        else:
            continue
        for options in candidates:
            targets.update(next(([c] for c in options if c in modules and c != name), []))
    return targets


def test_there_are_no_import_circles() -> None:
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import circle: {' -> '.join(exc.args[1])}")


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    """The check itself: two modules importing each other (one of them lazily) are a circle."""
    (tmp_path / "a.py").write_text("from .b import thing\n")
    (tmp_path / "b.py").write_text("def thing():\n    from .a import other\n")
    modules = {"p.a": tmp_path / "a.py", "p.b": tmp_path / "b.py"}
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter(graph).static_order())


def test_airflow_side_imports_only_the_public_api() -> None:
    """plugins/ and dags/ import `bench_tasks` (its __init__'s names) and nothing deeper."""
    deep = [
        f"{path.relative_to(REPO)}: {node.module}"
        for folder in ("plugins", "dags")
        for path in sorted((REPO / folder).rglob("*.py"))
        for node in ast.walk(_parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench_tasks.")
    ]
    assert not deep, "private bench_tasks modules imported by the Airflow side:\n" + "\n".join(deep)


SYSTEM_PACKAGE = re.compile(r"bench_tasks\.systems\.(\w+)")


def _public_names(module: str) -> frozenset[str]:
    """What tools outside the core may import from `module`: `bench_tasks`' exports, a system package's
    `__all__`; nothing from any other module of bench_tasks."""
    if module == "bench_tasks":
        return frozenset(bench_tasks._EXPORTS)
    if SYSTEM_PACKAGE.fullmatch(module) and (REPO / module.replace(".", "/") / "__init__.py").exists():
        return frozenset(importlib.import_module(module).__all__)
    return frozenset()


def _private_imports(source: str) -> list[str]:
    """Every import in `source`, at any depth (inside functions too), that reaches bench_tasks past its public
    API: `import bench_tasks.x`, `from bench_tasks.x import y` unless x is a system package whose `__all__` names
    y, and `from bench_tasks import y` of a name `bench_tasks` does not export (a submodule, say)."""
    found = []
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("bench_tasks.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.partition(".")[0] != "bench_tasks":
                continue
            public = _public_names(node.module)
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name not in public]
    return found


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "bench").glob("*.py")))
def test_benchmarks_import_only_public_names(script: str) -> None:
    """bench/ reaches the measurement library through `bench_tasks`' exports and the systems' `__all__`, so a module
    moved inside the library moves its public name with it (test_public_api) and no benchmark breaks unseen."""
    found = _private_imports((REPO / "bench" / script).read_text())
    assert not found, f"bench/{script} imports past the public API:\n" + "\n".join(found)


def test_the_benchmark_check_sees_private_imports() -> None:
    """The check itself: each way of reaching past the public API is caught, and the public ways are not."""
    source = """
import bench_tasks
import bench_tasks.cell.runner
from bench_tasks import run_cell, load
from bench_tasks.systems import system
from bench_tasks.systems.kafka import KAFKA, release
from bench_tasks.systems.nowhere import anything

def later():
    from bench_tasks.cell.runner import select_cells
"""
    assert _private_imports(source) == [
        "3: import bench_tasks.cell.runner",
        "4: from bench_tasks import load",
        "5: from bench_tasks.systems import system",
        "6: from bench_tasks.systems.kafka import release",
        "7: from bench_tasks.systems.nowhere import anything",
        "10: from bench_tasks.cell.runner import select_cells",
    ]


HEAVY = ("numpy", "pyarrow", "pandas", "pyspark", "confluent_kafka", "nats", "great_expectations", "matplotlib")


@pytest.mark.timeout(120)
def test_parsing_the_dag_folder_loads_nothing_heavy(tmp_path: Path) -> None:
    """DAG files are parsed again and again by Airflow's DAG processor: measurement, client and analysis libraries
    load inside tasks only. Prints how long the parse took (a figure, not a limit)."""
    probe = f"""
import importlib.util, sys, time
sys.path.insert(0, {str(REPO / "plugins")!r})
import airflow.sdk
before = set(sys.modules)
started = time.perf_counter()
for name in ("sixnines.py",):
    spec = importlib.util.spec_from_file_location(name[:-3], {str(REPO / "dags")!r} + "/" + name)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(round(time.perf_counter() - started, 3))
print(" ".join(sorted({{m.split(".")[0] for m in set(sys.modules) - before}})))
"""
    env = {"AIRFLOW_HOME": str(tmp_path), "PATH": str(Path(sys.executable).parent)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    seconds, loaded = done.stdout.splitlines()[-2:]
    print(f"DAG folder parsed in {seconds} s")
    assert not set(loaded.split()) & set(HEAVY), f"loaded at DAG parse time: {set(loaded.split()) & set(HEAVY)}"


def _sized() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in _modules().values())


@pytest.mark.parametrize("module", _sized())
def test_no_module_is_over_the_limit(module: str) -> None:
    lines = len((REPO / module).read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines"
