"""The shape of the code (issue 16): systems are plug-ins the core never names, imports form no circle, the
Airflow side reaches the measurement library only through its public API, and DAG parsing stays light."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = [
    p
    for folder in ("bench_tasks", "spark_jobs", "plugins", "dags", "expectations")
    for p in sorted((REPO / folder).rglob("*.py"))
    if "systems" not in p.relative_to(REPO).parts
]
SYSTEM_WORD = re.compile(r"kafka|nats|jetstream|rabbit|redis|valkey|pulsar", re.I)


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


def _module_imports(path: Path, package: str) -> set[str]:
    """bench_tasks modules `path` imports, at module level or inside functions (a lazy import still ties two
    modules together), leaving out imports for type checking only."""
    tree = _parse(path.read_text())
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("bench_tasks"):
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("bench_tasks"))
    return out


def test_no_import_cycles() -> None:
    modules = {}
    for path in sorted((REPO / "bench_tasks").rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        package = name if rel.name == "__init__" else name.rsplit(".", 1)[0]
        modules[name] = path, package
    graph = {
        name: {m for m in _module_imports(path, package) if m in modules and m != name}
        for name, (path, package) in modules.items()
    }
    for name in modules:  # a package's __init__ is imported with any of its modules
        parent = name.rsplit(".", 1)[0]
        while parent in modules and parent != name:
            graph[name].discard(parent)
            parent = parent.rsplit(".", 1)[0] if "." in parent else ""
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


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
for name in ("sixnines_sweeps.py", "sixnines_compare_versions.py"):
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
