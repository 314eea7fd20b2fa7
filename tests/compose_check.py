"""docker-compose.yaml checked against what the code expects, without a Docker engine.

There is no Docker engine on the development machines, so the deployment cannot be started here. What can be
checked statically is whether it is *consistent* with the code and the matrices, and that is where such files
go wrong: a connection id renamed in a plugin, an environment variable a new module reads, a matrix naming a
queue no worker consumes, an image left on `latest`. The expectations are scanned from the sources, not
listed by hand, so a name another module adds is picked up the day it is merged:

- environment variables read by the code: `os.environ.get("X")`, `os.environ["X"]`, `os.getenv("X")`,
  `os.environ.setdefault("X", …)`, `"X" in os.environ` (keys may be module-level string constants);
- connection ids: string constants named `*CONN_ID`, `conn_id`-like parameters' and keywords' string
  defaults, the default of `os.environ.get("…CONN_ID", "<default>")`, `get_connection("<id>")`, and the
  `connection:` of every matrix;
- pools: string constants named `*POOL` and `pool="…"` keywords; queues: `queue="…"` keywords, the
  `queue:` of every matrix's `hosts:` block, and Airflow's default queue.

Beyond names, the brokers must serve what the matrices measure on them: every `client.security` (and SASL
mechanism) a matrix uses on a compose connection has a listener, a user and a CA where that connection says
(`check_secured_routes`, section "secured broker routes").

Every function returns a list of problems (empty when the file is right), each naming the service, variable,
connection, queue or image concerned, so a failing test says what to fix.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import yaml

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("bench_tasks", "plugins", "dags", "spark_jobs", "expectations")
DEFAULT_QUEUE = "default"  # [operators] default_queue: where a task without `queue=` goes

# Variables the code may read that a deployment does not set on purpose. Everything else the code reads must be
# defined for the Airflow services (in docker-compose.yaml or by the image's Dockerfile ENV).
ENV_ALLOW_LIST = frozenset(
    {
        "PATH",  # the OS's; the image puts the Python scripts (spark-submit, airflow) on it
        "HOME",  # the OS's
        "AIRFLOW_HOME",  # the Airflow base image's (/opt/airflow)
        "PYSPARK_GATEWAY_PORT",  # set by spark-submit for the Python driver it starts: tells "inside spark-submit"
        "PYSPARK_PYTHON",  # defaulted by spark_jobs.session on a local master; the image's workers run its python3
    }
)

# The Airflow components a Celery deployment needs, by the command the image's entrypoint runs.
AIRFLOW_ROLES = ("api-server", "scheduler", "dag-processor", "triggerer", "celery worker")

_ENV_READERS = {("os", "getenv"), ("environ", "get"), ("environ", "setdefault"), ("environ", "pop")}
_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)((?::?[-?])([^}]*))?\}")
_BARE_VAR = re.compile(r"(?<!\$)\$(?!\$)([A-Za-z_][A-Za-z0-9_]*)")


# -- what the code expects ------------------------------------------------------------------------------------


@dataclass
class Expectations:
    """Names the code and the matrices rely on, each with where it was found (for the failure message)."""

    env_vars: dict[str, str] = field(default_factory=dict)
    conn_ids: dict[str, str] = field(default_factory=dict)
    pools: dict[str, str] = field(default_factory=dict)
    queues: dict[str, str] = field(default_factory=dict)


def python_files(root: Path, dirs: Iterable[str] = SOURCE_DIRS) -> Iterator[Path]:
    for name in dirs:
        yield from sorted((root / name).rglob("*.py"))


def _constants(tree: ast.Module) -> dict[str, tuple[str, int]]:
    """Module-level `NAME = "literal"` (and annotated) assignments → (value, line): keys passed by name."""
    out: dict[str, tuple[str, int]] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.update({t.id: (value.value, node.lineno) for t in targets if isinstance(t, ast.Name)})
    return out


def _string(node: ast.expr | None, constants: dict[str, tuple[str, int]]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id][0]
    return None


def _is_environ(node: ast.expr) -> bool:
    """`os.environ` or a bare `environ` (from os import environ)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _reader(func: ast.expr) -> bool:
    """Is `func` one of os.getenv, os.environ.get/setdefault/pop?"""
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "getenv":
        return isinstance(func.value, ast.Name) and func.value.id == "os"
    return ("environ", func.attr) in _ENV_READERS and _is_environ(func.value)


def _is_conn_name(name: str) -> bool:
    return name.lower().endswith("conn_id")


def scan_source(path: Path, found: Expectations, root: Path = REPO) -> None:
    """Add the environment variables, connection ids, pools and queues one Python file names. Only Airflow
    code (plugins/, dags/) names Airflow queues: `queue=` in bench_tasks is a broker's queue group."""
    tree = ast.parse(path.read_text(), filename=str(path))
    constants = _constants(tree)
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    airflow_code = path.is_relative_to(root) and path.relative_to(root).parts[0] in ("plugins", "dags")

    def note(kind: dict[str, str], name: str | None, line: int) -> None:
        if name:
            kind.setdefault(name, f"{where}:{line}")

    for name, (value, line) in constants.items():
        if _is_conn_name(name):
            note(found.conn_ids, value, line)
        elif name.upper().endswith("POOL"):
            note(found.pools, value, line)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _reader(node.func) and node.args:
                key = _string(node.args[0], constants)
                note(found.env_vars, key, node.lineno)
                if key and _is_conn_name(key) and len(node.args) > 1:  # SIXNINES_LAKE_CONN_ID's default id
                    note(found.conn_ids, _string(node.args[1], constants), node.lineno)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get_connection" and node.args:
                note(found.conn_ids, _string(node.args[0], constants), node.lineno)
            for kw in node.keywords:
                if kw.arg and _is_conn_name(kw.arg):
                    note(found.conn_ids, _string(kw.value, constants), node.lineno)
                elif kw.arg == "pool":
                    note(found.pools, _string(kw.value, constants), node.lineno)
                elif kw.arg == "queue" and airflow_code:
                    note(found.queues, _string(kw.value, constants), node.lineno)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            note(found.env_vars, _string(node.slice, constants), node.lineno)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            if _is_environ(node.comparators[0]):
                note(found.env_vars, _string(node.left, constants), node.lineno)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            defaults = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
            defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            for arg, default in defaults:
                if _is_conn_name(arg.arg):
                    note(found.conn_ids, _string(default, constants), node.lineno)


def _walk_yaml(node: Any) -> Iterator[tuple[str, Any, Any]]:
    """Every (key, value, mapping) pair of a parsed YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value, node
            yield from _walk_yaml(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_yaml(item)


def scan_matrix(path: Path, found: Expectations, root: Path = REPO) -> None:
    """A matrix's `connection:` ids (external brokers) and its `hosts:` queues (load-generator workers)."""
    data = yaml.safe_load(path.read_text()) or {}
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    for key, value, _ in _walk_yaml(data):
        if key == "connection" and isinstance(value, str):
            found.conn_ids.setdefault(value, where)
    hosts = data.get("hosts") if isinstance(data, dict) else None
    for name, host in (hosts or {}).items():
        if isinstance(host, dict) and isinstance(host.get("queue"), str):
            found.queues.setdefault(host["queue"], f"{where} hosts.{name}")


def expectations(root: Path = REPO) -> Expectations:
    """Everything the code under `root` and its matrices expect a deployment to provide."""
    found = Expectations(queues={DEFAULT_QUEUE: "Airflow's default queue"})
    for path in python_files(root):
        scan_source(path, found, root)
    for path in sorted((root / "matrices").glob("*.y*ml")):
        scan_matrix(path, found, root)
    return found


# -- what the compose file provides ---------------------------------------------------------------------------


def load_compose(path: Path = REPO / "docker-compose.yaml") -> dict[str, Any]:
    """The compose file as Docker reads it: YAML with anchors and `<<` merge keys resolved (PyYAML does both)."""
    return yaml.safe_load(path.read_text())


def command_text(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return shlex.join(command) if isinstance(command, list) else str(command)


def airflow_services(compose: dict[str, Any]) -> dict[str, str]:
    """Long-running Airflow components by service name → role (the command the Airflow entrypoint runs)."""
    out = {}
    for name, service in compose.get("services", {}).items():
        text = command_text(service).removeprefix("airflow ").strip()
        role = next((r for r in AIRFLOW_ROLES if text == r or text.startswith(r + " ")), None)
        if role:
            out[name] = role
    return out


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the `- KEY=value` form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def dockerfile_env(path: Path = REPO / "Dockerfile") -> set[str]:
    """Variables the image itself sets (`ENV A=1 B=2` or `ENV A 1`), which every container inherits."""
    names: set[str] = set()
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0].upper() == "ENV":
            if "=" in parts[1].split()[0]:
                names.update(m.group(1) for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)=", parts[1]))
            else:
                names.add(parts[1].split()[0])
    return names


def dockerfile_bases(path: Path = REPO / "Dockerfile") -> list[str]:
    return [line.split()[1] for line in path.read_text().splitlines() if line.strip().upper().startswith("FROM ")]


def compose_variables(text: str) -> dict[str, str | None]:
    """`${VAR}` references of the compose text → their inline default (None if none); `$${…}` is an escape."""
    out: dict[str, str | None] = {}
    for match in _VAR.finditer(text):
        name, op, default = match.group(1), match.group(2) or "", match.group(3)
        if name not in out or out[name] is None:
            out[name] = default if op.lstrip(":").startswith("-") else None
    return out


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation of one string with `env` (the .env file): ${V}, ${V:-d}, ${V-d}, ${V:?e}, $$."""

    def one(match: re.Match[str]) -> str:
        name, op, default = match.group(1), match.group(2) or "", match.group(3) or ""
        if name in env and (env[name] or not op.startswith(":")):
            return env[name]
        if op.lstrip(":").startswith("-"):
            return default
        if op.lstrip(":").startswith("?"):
            raise KeyError(f"${{{name}}} is required: {default}")
        return ""

    return _VAR.sub(one, value).replace("$$", "$")


def env_file(text: str) -> dict[str, str]:
    """The assignments of a .env file (commented-out `# NAME=value` lines are documentation, not values)."""
    out = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line.strip())
        if match:
            out[match.group(1)] = match.group(2).strip().strip("'\"")
    return out


def documented(text: str) -> dict[str, bool]:
    """Each variable a .env.example names (set, or commented out as optional) → whether a comment line
    directly above it (or above its group of assignments) explains it."""
    out: dict[str, bool] = {}
    commented = False
    for line in text.splitlines():
        stripped = line.strip()
        match = re.match(r"^#?\s*([A-Z_][A-Z0-9_]*)=", stripped)
        if match:
            out[match.group(1)] = commented
        elif stripped.startswith("#"):
            commented = True
        elif not stripped:
            commented = False
    return out


# -- the checks -----------------------------------------------------------------------------------------------


def check_roles(compose: dict[str, Any]) -> list[str]:
    present = set(airflow_services(compose).values())
    return [f"no Airflow service runs `{role}`" for role in AIRFLOW_ROLES if role not in present]


def check_environment(
    compose: dict[str, Any], expected: Expectations, image_env: set[str], allow: frozenset[str] = ENV_ALLOW_LIST
) -> list[str]:
    problems = []
    for name in airflow_services(compose):
        defined = set(environment(compose["services"][name])) | image_env
        for var, where in sorted(expected.env_vars.items()):
            if var not in defined and var not in allow:
                problems.append(f"service {name}: environment variable {var} (read at {where}) is not defined")
    return problems


def check_connections(compose: dict[str, Any], expected: Expectations) -> list[str]:
    problems = []
    for name in airflow_services(compose):
        env = environment(compose["services"][name])
        for conn_id, where in sorted(expected.conn_ids.items()):
            if f"AIRFLOW_CONN_{conn_id.upper()}" not in env:
                problems.append(
                    f"service {name}: connection {conn_id} (used at {where}) has no AIRFLOW_CONN_{conn_id.upper()}"
                )
    return problems


def check_connection_values(compose: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Every AIRFLOW_CONN_* value, interpolated with `env`, is Airflow's JSON form or a URI with a type."""
    problems = []
    for name in airflow_services(compose):
        for key, raw in environment(compose["services"][name]).items():
            if not key.startswith("AIRFLOW_CONN_"):
                continue
            value = interpolate(raw, env).strip()
            if not value:
                continue  # optional and unset (sixnines_notify): Airflow treats it as absent
            if value.startswith("{"):
                try:
                    ok = isinstance(json.loads(value).get("conn_type"), str)
                except ValueError as exc:
                    problems.append(f"service {name}: {key} is not valid JSON: {exc}")
                    continue
                if not ok:
                    problems.append(f"service {name}: {key} has no conn_type")
            elif not urlsplit(value).scheme:
                problems.append(f"service {name}: {key} is neither JSON nor a URI with a connection type")
    return problems


def check_images(compose: dict[str, Any], bases: list[str]) -> list[str]:
    """Pinned: a digest, or a tag with a version number that is not `latest`; built services by their FROM."""
    problems = []
    for name, service in compose.get("services", {}).items():
        if "build" in service:
            refs = [(f"service {name}: Dockerfile FROM", base) for base in bases]
        else:
            refs = [(f"service {name}", interpolate(str(service.get("image", "")), {}))]
        for label, ref in refs:
            if not ref:
                problems.append(f"{label}: no image")
                continue
            if "@sha256:" in ref:
                continue
            tag = ref.rsplit("/", 1)[-1].partition(":")[2]
            if not tag or tag == "latest" or not re.search(r"\d", tag):
                problems.append(f"{label}: image {ref} is not pinned (needs a version tag or a digest)")
    return problems


def one_shot(compose: dict[str, Any]) -> set[str]:
    """Services others wait for with `service_completed_successfully`: they run once and exit."""
    out = set()
    for service in compose.get("services", {}).values():
        depends = service.get("depends_on") or {}
        if isinstance(depends, dict):
            out |= {n for n, d in depends.items() if (d or {}).get("condition") == "service_completed_successfully"}
    return out


def check_healthchecks(compose: dict[str, Any]) -> list[str]:
    problems = []
    once = one_shot(compose)
    services = compose.get("services", {})
    for name, service in services.items():
        check = service.get("healthcheck") or {}
        test = check.get("test")
        if name in once:
            if str(service.get("restart", "no")) != "no":
                problems.append(f"service {name}: runs once but has restart: {service.get('restart')}")
            continue
        if check.get("disable") or not test or test in (["NONE"], "NONE"):
            problems.append(f"service {name}: long-running but has no healthcheck")
        depends = service.get("depends_on") or {}
        if isinstance(depends, list):
            problems.append(f"service {name}: depends_on without conditions (use condition: service_healthy)")
            continue
        for dep, spec in depends.items():
            condition = (spec or {}).get("condition")
            if dep not in services:
                problems.append(f"service {name}: depends on unknown service {dep}")
            elif condition not in ("service_healthy", "service_completed_successfully"):
                problems.append(f"service {name}: depends on {dep} with condition {condition}")
            elif condition == "service_healthy" and not (services[dep].get("healthcheck") or {}).get("test"):
                problems.append(f"service {name}: waits for {dep} to be healthy but {dep} has no healthcheck")
    return problems


def worker_queues(compose: dict[str, Any]) -> dict[str, list[str]]:
    """Celery worker services → the queues they consume (`-q a,b`, `--queues a,b`, `--queues=a`)."""
    out = {}
    for name, role in airflow_services(compose).items():
        if role != "celery worker":
            continue
        words = shlex.split(command_text(compose["services"][name]))
        queues: list[str] = []
        for i, word in enumerate(words):
            if word in ("-q", "--queues") and i + 1 < len(words):
                queues += words[i + 1].split(",")
            elif word.startswith("--queues="):
                queues += word.partition("=")[2].split(",")
            elif word.startswith("-q") and len(word) > 2:
                queues += word[2:].split(",")
        out[name] = queues or [DEFAULT_QUEUE]  # a worker without -q consumes the default queue
    return out


def check_queues(compose: dict[str, Any], expected: Expectations) -> list[str]:
    consumed = {q for queues in worker_queues(compose).values() for q in queues}
    return [
        f"queue {queue} (named at {where}) has no Celery worker consuming it"
        for queue, where in sorted(expected.queues.items())
        if queue not in consumed
    ]


def check_pools(compose: dict[str, Any], expected: Expectations) -> list[str]:
    """Every pool the code puts tasks in is created by a one-shot init service (`airflow pools set NAME`)."""
    scripts = " ".join(command_text(compose["services"][n]) for n in one_shot(compose) if n in compose["services"])
    return [
        f"pool {pool} (used at {where}) is not created by an init service (airflow pools set {pool} …)"
        for pool, where in sorted(expected.pools.items())
        if not re.search(rf"pools set {re.escape(pool)}\b", scripts)
    ]


def check_variables_documented(compose_text: str, env_example: str) -> list[str]:
    """Every `${VAR}` of the compose file appears in .env.example under a comment, and nothing else does."""
    problems = [
        f"${name} is not written as ${{{name}}} (or escaped as $${name})"
        for name in sorted({m.group(1) for m in _BARE_VAR.finditer(compose_text)})
    ]
    used = compose_variables(compose_text)
    docs = documented(env_example)
    for name in sorted(used):
        if name not in docs:
            problems.append(f"${{{name}}} is used by docker-compose.yaml but not in .env.example")
        elif not docs[name]:
            problems.append(f"{name} in .env.example has no comment explaining it")
    problems += [
        f"{name} is in .env.example but docker-compose.yaml never uses it" for name in sorted(set(docs) - set(used))
    ]
    return problems


def _hosts_in(value: Any) -> Iterator[str]:
    """Host names in a connection's host or extras: `h`, `h:port`, `scheme://h:port`, comma-separated lists."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _hosts_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _hosts_in(item)
    elif isinstance(value, str):
        for part in value.split(","):
            part = part.strip()
            if not part or part.startswith(("/", "{")):
                continue
            host = urlsplit(part if "://" in part else f"//{part}").hostname
            if host and re.fullmatch(r"[a-z0-9][a-z0-9.-]*", host) and ("://" in part or ":" in part):
                yield host


def check_connection_hosts(compose: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Every `host:port` or URL an AIRFLOW_CONN_* value names (host, extras such as bootstrap servers) is a
    service of this file: a connection meant for the compose brokers must not point anywhere else."""
    services = compose.get("services", {})
    names = set(services) | {s["hostname"] for s in services.values() if s.get("hostname")}
    problems = []
    for name in airflow_services(compose):
        for key, raw in environment(services[name]).items():
            value = interpolate(raw, env).strip() if key.startswith("AIRFLOW_CONN_") else ""
            if not value:
                continue
            if value.startswith("{"):
                try:
                    data = json.loads(value)
                except ValueError:
                    continue  # check_connection_values reports it
                host = data.get("host") or ""
                hosts = [host] if host else []
                hosts += list(_hosts_in(data.get("extra") or {}))
            else:
                hosts = [urlsplit(value).hostname or ""]
            problems += [
                f"service {name}: {key} names host {host}, which is no service of docker-compose.yaml"
                for host in hosts
                if host and host not in names
            ]
    return problems


# Options of providers the image installs (the `deploy` extra) but the development venv does not, so their
# definitions cannot be read here: (section, option).
PROVIDER_OPTIONS = frozenset({("celery", "result_backend")})


def airflow_options() -> set[tuple[str, str]]:
    """Every (section, option) Airflow core defines, plus the provider defaults it ships as fallbacks, read
    from the installed package's config templates (without importing Airflow)."""
    import configparser
    import importlib.util

    spec = importlib.util.find_spec("airflow")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("apache-airflow is not installed")
    templates = Path(next(iter(spec.submodule_search_locations))) / "config_templates"
    config = yaml.safe_load((templates / "config.yml").read_text())
    options = {(section, option) for section, body in config.items() for option in (body.get("options") or {})}
    fallback = configparser.ConfigParser(interpolation=None)
    fallback.read(templates / "provider_config_fallback_defaults.cfg")
    options |= {(section, option) for section in fallback.sections() for option in fallback.options(section)}
    return options | PROVIDER_OPTIONS


def check_airflow_options(compose: dict[str, Any], known: set[tuple[str, str]]) -> list[str]:
    """`AIRFLOW__SECTION__OPTION` variables name real options: Airflow ignores a misspelt one silently."""
    problems = []
    for name in airflow_services(compose):
        for key in sorted(environment(compose["services"][name])):
            parts = key.split("__")
            if parts[0] != "AIRFLOW" or len(parts) < 3:
                continue
            option = (parts[1].lower(), parts[2].lower().removesuffix("_cmd").removesuffix("_secret"))
            if option not in known and (parts[1].lower(), parts[2].lower()) not in known:
                problems.append(f"service {name}: {key} is no Airflow option ([{option[0]}] {parts[2].lower()})")
    return problems


# -- secrets in process arguments -----------------------------------------------------------------------------
#
# Every user of a host (or container) can read any process's command line. A secret variable (by the harness's
# one rule, bench_tasks.secrecy.is_secret: *PASSWORD*, *SECRET*, *TOKEN*, …) may therefore appear in a command
# only where no program receives it as an argument: as an argument of a shell builtin (printf writing a private
# file or a pipe, export), never of a program the shell starts.

_SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/env")
_BUILTINS = frozenset({"printf", "echo", "export", "read", "local", "test", "[", ":", "set", "umask", "cd", "true"})
_VAR_REF = re.compile(r"\$\$?\{?([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _scripts(service: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(shell scripts, exec-form argv) of a service: a shell entrypoint (`sh -ec`) runs its command's strings as
    scripts; otherwise the command is one program's argument list."""
    entry = service.get("entrypoint") or []
    entry = shlex.split(entry) if isinstance(entry, str) else [str(a) for a in entry]
    command = service.get("command") or []
    words = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if entry and entry[0] in _SHELLS:
        return [w for w in words if not w.startswith("-")], []
    if any("\n" in w for w in words):
        return [w for w in words if "\n" in w], []
    return [], words


def _statements(script: str) -> Iterator[str]:
    """The simple commands of a shell script, roughly: continuations joined, split at ; && || | and grouping."""
    text = script.replace("\\\n", " ")
    text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}", r"$\1", text)  # ${X:-d} → $X: its braces group nothing
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line)
        for part in re.split(r"\|\||&&|[;|(){}]", line):
            if part.strip():
                yield part.strip()


def _program(statement: str) -> str | None:
    """The program a simple command starts (None for a builtin or a bare assignment)."""
    try:
        words = shlex.split(statement)
    except ValueError:
        words = statement.split()
    words = [w for w in words if not _ASSIGNMENT.match(w)]
    if words[:1] == ["exec"]:
        words = words[1:]
    return words[0] if words and words[0] not in _BUILTINS else None


def check_secret_arguments(compose: dict[str, Any]) -> list[str]:
    from bench_tasks.secrecy import is_secret

    problems: set[str] = set()
    for name, service in sorted(compose.get("services", {}).items()):
        scripts, argv = _scripts(service)
        found = [(_program(s), s) for script in scripts for s in _statements(script)]
        if argv:
            found.append((argv[0], " ".join(argv[1:])))
        for program, text in found:
            for var in _VAR_REF.findall(text) if program else []:
                if is_secret(var):
                    problems.add(
                        f"service {name}: ${var} is an argument of {program} (every user sees a process's "
                        "arguments): hand it over in a 0600 file or on standard input"
                    )
    return sorted(problems)


# -- secured broker routes ------------------------------------------------------------------------------------
#
# A matrix measures Kafka's client security as an axis (`client.security`, `client.sasl_mechanism`) against one
# connection whose extra `listeners` maps each protocol to bootstrap servers; NATS over TLS with a user. For each
# route a matrix uses on a compose connection, the compose brokers must really serve it: a listener of that
# protocol on the advertised host:port the connection names, the SASL mechanism enabled with a JAAS entry on
# that listener and the connection's user created at format time, and for TLS the CA the connection names
# mounted (from the volume the certificate service writes) in every worker that runs cells, the brokers' key
# material in the same volume, and every broker's name in the certificate.


@dataclass(frozen=True)
class Route:
    """One way a matrix reaches external brokers: where it is asked for, connection, system and security."""

    where: str
    conn_id: str
    system: str
    security: str | None = None
    mechanism: str | None = None


def matrix_routes(root: Path = REPO) -> list[Route]:
    """The distinct external routes of every matrix under `root` (its cells, as the harness expands them)."""
    from bench_tasks.spec.matrix import load_matrix

    seen: dict[tuple[Any, ...], Route] = {}
    for path in sorted((root / "matrices").glob("*.y*ml")):
        where = str(path.relative_to(root))
        for cell in load_matrix(path).cells:
            spec = cell.spec
            if spec.brokers != "external" or not spec.connection:
                continue
            client = spec.client
            route = Route(
                where,
                spec.connection,
                spec.system,
                getattr(client, "security", None),
                getattr(client, "sasl_mechanism", None),
            )
            seen.setdefault((route.conn_id, route.system, route.security, route.mechanism), route)
    return list(seen.values())


def java_properties(text: str) -> dict[str, str]:
    """`key=value` lines of a .properties text (comments and blank lines skipped)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def service_configs(compose: dict[str, Any], name: str) -> dict[str, str]:
    """Target path → content of the top-level `configs:` a service mounts (inline `content:` only)."""
    configs = compose.get("configs") or {}
    out = {}
    for item in compose["services"][name].get("configs") or []:
        source = item if isinstance(item, str) else item.get("source")
        target = f"/{source}" if isinstance(item, str) else item.get("target", f"/{source}")
        out[target] = str((configs.get(source) or {}).get("content", ""))
    return out


def volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path → named volume (or host path) of a service's `volumes:` (short or long syntax)."""
    out = {}
    for item in service.get("volumes") or []:
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) >= 2:
                out[parts[1]] = parts[0]
        elif isinstance(item, dict) and item.get("target"):
            out[item["target"]] = str(item.get("source", ""))
    return out


def volume_at(service: dict[str, Any], path: str) -> str | None:
    """The volume a file path of the container lives on (the longest mount target containing it)."""
    mounts = volume_mounts(service)
    best = max((t for t in mounts if path == t or path.startswith(t.rstrip("/") + "/")), key=len, default=None)
    return mounts[best] if best else None


class CertificateService(NamedTuple):
    """The one-shot service running `brokers certs FOLDER [--ca-out DIR] --host …`: the volume its keys and
    certificates go to, the names they cover, and the volume holding the CA alone (what clients mount)."""

    service: str
    key_volume: str
    hosts: list[str]
    ca_volume: str


def certificate_service(compose: dict[str, Any]) -> CertificateService | None:
    for name in sorted(one_shot(compose)):
        service = compose["services"].get(name) or {}
        words = shlex.split(command_text(service))
        if "certs" not in words or "brokers" not in words:
            continue
        folder = words[words.index("certs") + 1]
        ca_folder = words[words.index("--ca-out") + 1] if "--ca-out" in words[:-1] else folder
        hosts = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--host"]
        keys = volume_at(service, folder + "/ca.pem") or ""
        return CertificateService(name, keys, hosts, volume_at(service, ca_folder + "/ca.pem") or "")
    return None


def _service_by_host(compose: dict[str, Any], host: str) -> str | None:
    for name, service in compose.get("services", {}).items():
        if host in (name, service.get("hostname")):
            return name
    return None


def _conn(compose: dict[str, Any], env: dict[str, str], service: str, conn_id: str) -> Any:
    from bench_tasks.brokers.connections import env_var, parse_connection

    raw = environment(compose["services"][service]).get(env_var(conn_id), "")
    value = interpolate(raw, env).strip()
    return parse_connection(conn_id, value) if value else None


def _interp_env(service: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    return {k: interpolate(v, env) for k, v in environment(service).items()}


def _tls_file_problems(
    compose: dict[str, Any],
    label: str,
    path: str,
    readers: list[str],
    certs: CertificateService | None,
    client: bool = False,
) -> list[str]:
    """`path` (a CA or key file) lies on the certificate service's volume in every service in `readers`: the
    CA-only volume for clients (`client`), the key volume for brokers."""
    if certs is None:
        return [f"{label}: {path} — no one-shot service makes broker certificates (`brokers certs …`)"]
    volume = certs.ca_volume if client else certs.key_volume
    found = {reader: volume_at(compose["services"][reader], path) for reader in readers}
    return [
        f"{label}: {path} is not on volume {volume} in service {reader} (mounted there: {there})"
        for reader, there in found.items()
        if there != volume
    ]


def kafka_listeners(text: str) -> list[tuple[str, str, str]]:
    """(listener name, host, port) of Kafka's `listeners`/`advertised.listeners` (`NAME://host:port`, host may be
    empty). Not urlsplit: listener names such as SASL_SSL are no valid URL schemes."""
    found = (re.fullmatch(r"([A-Za-z0-9_]+)://([^:/]*):(\d+)", item.strip()) for item in text.split(","))
    return [(m.group(1).upper(), m.group(2), m.group(3)) for m in found if m]


def _kafka_route(
    compose: dict[str, Any], env: dict[str, str], route: Route, conn: Any, workers: list[str], certs: Any
) -> list[str]:
    from bench_tasks.errors import BrokerError
    from bench_tasks.systems.kafka.access import kafka_access

    label = f"{route.where}: kafka client.security {route.security or 'default'} via {route.conn_id}"
    try:
        access = kafka_access(conn, route.security, route.mechanism)
    except BrokerError as exc:
        return [f"{label}: {exc}"]
    protocol = access.client["security.protocol"]
    mechanism = access.client.get("sasl.mechanism")
    problems = []
    if protocol.endswith("SSL"):
        ca = access.client.get("ssl.ca.location")
        if not ca:
            problems.append(f"{label}: the connection names no extra.ssl_ca_location")
        else:
            problems += _tls_file_problems(compose, label, ca, workers, certs, client=True)
    for address in access.address.split(","):
        host, _, port = address.strip().rpartition(":")
        name = _service_by_host(compose, host)
        if name is None:
            problems.append(f"{label}: {address} is no service of docker-compose.yaml")
            continue
        service = compose["services"][name]
        props: dict[str, str] = {}
        for target, content in service_configs(compose, name).items():
            if target.endswith(".properties"):
                props |= java_properties(content)
        node = _interp_env(service, env)
        advertised = node.get("KAFKA_ADVERTISED_LISTENERS", props.get("advertised.listeners", ""))
        protocols = dict(
            p.split(":", 1) for p in props.get("listener.security.protocol.map", "").split(",") if ":" in p
        )
        bound = {n: p for n, _, p in kafka_listeners(props.get("listeners", ""))}
        served = {f"{h}:{p}": n for n, h, p in kafka_listeners(advertised)}
        listener = served.get(f"{host}:{port}")
        if listener is None or protocols.get(listener) != protocol:
            have = sorted(f"{a} ({protocols.get(n, '?')})" for a, n in served.items())
            problems.append(
                f"{label}: {address} is no {protocol} listener of service {name} (it advertises {', '.join(have)})"
            )
            continue
        if bound.get(listener) != port:
            problems.append(f"{label}: service {name} advertises {listener} on {port} but does not listen there")
        if mechanism:
            enabled = props.get("sasl.enabled.mechanisms", "GSSAPI").split(",")
            if mechanism not in enabled:
                problems.append(
                    f"{label}: service {name} does not enable SASL mechanism {mechanism} ({', '.join(enabled)})"
                )
            jaas = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
            if jaas not in props:
                problems.append(f"{label}: service {name} has no {jaas}")
            users = {
                m: (node.get(u, ""), node.get(p, ""))
                for m, u, p in re.findall(
                    r"--add-scram\s+\"?(SCRAM-SHA-\d+)=\[name=\$+\{?(\w+)\}?,password=\$+\{?(\w+)\}?\]",
                    command_text(service),
                )
            }
            if mechanism.startswith("SCRAM") and users.get(mechanism) != (conn.login, conn.password):
                problems.append(
                    f"{label}: service {name} does not create the connection's user {conn.login!r} for {mechanism} "
                    f"at format time (--add-scram users: {sorted((m, u) for m, (u, _) in users.items())})"
                )
        if protocol.endswith("SSL"):
            for key in ("ssl.keystore.location", "ssl.truststore.location"):
                if key not in props:
                    problems.append(f"{label}: service {name} has no {key}")
                else:
                    problems += _tls_file_problems(compose, f"{label} ({key})", props[key], [name], certs)
            if certs is not None and host not in certs[2]:
                problems.append(f"{label}: the broker certificate ({certs[0]}) does not name {host}")
    return problems


def _nats_route(
    compose: dict[str, Any], env: dict[str, str], route: Route, conn: Any, workers: list[str], certs: Any
) -> list[str]:
    from bench_tasks.systems.nats.access import nats_access

    label = f"{route.where}: nats via {route.conn_id}"
    access = nats_access(conn)
    ca = access.client.get("tls_ca_file")
    problems = _tls_file_problems(compose, label, ca, workers, certs, client=True) if ca else []
    for url in access.address.split(","):
        parts = urlsplit(url.strip())
        name = _service_by_host(compose, parts.hostname or "")
        if name is None:
            problems.append(f"{label}: {url} is no service of docker-compose.yaml")
            continue
        service = compose["services"][name]
        conf = "\n".join(c for t, c in service_configs(compose, name).items() if t.endswith(".conf"))
        node = _interp_env(service, env)
        tls = re.search(r"tls\s*\{([^}]*)\}", conf)
        if tls and not ca:
            problems.append(f"{label}: service {name} requires TLS but the connection names no extra.tls_ca_file")
        if ca and not tls:
            problems.append(f"{label}: the connection expects TLS but service {name} has no tls block")
        if tls:
            files = dict(re.findall(r"(cert_file|key_file)\s*:\s*\"?([^\s\"]+)", tls.group(1)))
            for key in ("cert_file", "key_file"):
                if key not in files:
                    problems.append(f"{label}: service {name}'s tls block has no {key}")
                else:
                    problems += _tls_file_problems(compose, f"{label} ({key})", files[key], [name], certs)
            if parts.scheme != "tls":
                problems.append(f"{label}: {url} should use tls:// (service {name} requires TLS)")
            if certs is not None and parts.hostname not in certs[2]:
                problems.append(f"{label}: the broker certificate ({certs[0]}) does not name {parts.hostname}")
        auth = re.search(r"authorization\s*\{([^}]*)\}", conf)
        if auth:
            fields = dict(re.findall(r"(user|password)\s*:\s*\"?([^\s\"]+)", auth.group(1)))
            want = tuple(
                node.get(v.lstrip("$"), "") if v.startswith("$") else v
                for v in (fields.get("user", ""), fields.get("password", ""))
            )
            if want != (conn.login, conn.password):
                problems.append(
                    f"{label}: the connection's user {conn.login!r} is not service {name}'s authorization user"
                )
    return problems


def check_secured_routes(compose: dict[str, Any], env: dict[str, str], routes: list[Route]) -> list[str]:
    """Each route a matrix uses on a compose connection is served by the compose brokers (see the section
    comment above); connections the file does not define are check_connections' to report."""
    workers = sorted(n for n, role in airflow_services(compose).items() if role == "celery worker")
    certs = certificate_service(compose)
    problems = []
    for route in routes:
        conn = _conn(compose, env, workers[0], route.conn_id) if workers else None
        if conn is None:
            continue
        check = _kafka_route if route.system == "kafka" else _nats_route
        problems += check(compose, env, route, conn, workers, certs)
    return problems


# -- least exposure ---------------------------------------------------------------------------------------------
#
# What the deployment shows the world: published ports only on the Docker host's loopback unless an operator
# chooses otherwise (the Spark master UI has no login and can kill applications), the lake reached with a MinIO
# user of its own rather than the root account, no example secret ever accepted, NATS routes that admit only
# nodes with a certificate of the deployment's CA, and no broker private key on a Celery worker.

PUBLISH_DEFAULT = "${SIXNINES_PUBLISH_ADDRESS:-127.0.0.1}"
_ALL_INTERFACES = ("", "0.0.0.0", "::", "[::]")


def example_env(text: str) -> dict[str, str]:
    """The .env an operator writes from .env.example: each secret it leaves empty set (to a test value made of
    letters and digits, as the file asks), the rest as they are."""
    import hashlib

    return {k: v or "t" + hashlib.sha256(k.encode()).hexdigest()[:20] for k, v in env_file(text).items()}


def published(compose: dict[str, Any], env: dict[str, str]) -> dict[str, list[str]]:
    """Each service's short-syntax `ports:` entries as compose interpolates them with `env`."""
    return {
        name: [interpolate(str(p), env) for p in service["ports"] if not isinstance(p, dict)]
        for name, service in sorted(compose.get("services", {}).items())
        if service.get("ports")
    }


def check_published_ports(compose: dict[str, Any], env: dict[str, str]) -> list[str]:
    problems = []
    for name, service in sorted(compose.get("services", {}).items()):
        for port in service.get("ports") or []:
            if isinstance(port, dict):
                if str(port.get("host_ip", "")) in _ALL_INTERFACES:
                    problems.append(
                        f"service {name} publishes {port.get('published')} on every interface of the Docker host "
                        f"(give it host_ip {PUBLISH_DEFAULT})"
                    )
                continue
            text = interpolate(str(port), env)
            host_ip = text.rsplit(":", 2)[0] if text.count(":") >= 2 else ""
            if host_ip in _ALL_INTERFACES:
                problems.append(
                    f"service {name} publishes {text} on every interface of the Docker host (prefix it with "
                    f"{PUBLISH_DEFAULT}:)"
                )
    return problems


def check_lake_credentials(compose: dict[str, Any]) -> list[str]:
    """The lake's credentials (AWS_* variables, the lake's S3 connection) are not MinIO's root account."""
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AIRFLOW_CONN_SIXNINES_LAKE_S3")
    problems = []
    for name, service in sorted(compose.get("services", {}).items()):
        env = environment(service)
        for key in keys:
            root = sorted({v for v, _, _ in _VAR.findall(env.get(key, "")) if v.startswith("MINIO_ROOT_")})
            if root:
                problems.append(
                    f"service {name}: {key} uses MinIO's root account ({', '.join(root)}); the lake has its own user"
                )
    return problems


def check_example_refused(compose_text: str, env_example: str) -> list[str]:
    """Every variable compose requires (`${X:?…}`) is empty in .env.example: a copied example never starts."""
    values = env_file(env_example)
    return [
        f"{var} has a value in .env.example ({values[var]}): compose would start on it; leave it empty so "
        f"`${{{var}:?…}}` refuses to start until it is set"
        for var, default in sorted(compose_variables(compose_text).items())
        if default is None and values.get(var)
    ]


# Variables whose names read as secrets (bench_tasks.secrecy.is_secret) but hold none.
NOT_SECRETS = {"SIXNINES_LAKE_SPARK_CREDENTIALS": "a mode (`cluster` or empty), not a credential"}


def check_secrets_required(compose_text: str) -> list[str]:
    """Every secret the compose file reads is required (`${X:?…}`) wherever it is read: a secret with a default
    (empty, or an example value) would let a deployment start without it (an empty Fernet key stores connection
    passwords unencrypted)."""
    from bench_tasks.secrecy import is_secret

    forms: dict[str, set[str]] = {}
    for match in _VAR.finditer(compose_text):
        name, op = match.group(1), (match.group(2) or "")[:2]
        if is_secret(name) and name not in NOT_SECRETS:
            forms.setdefault(name, set()).add(op)
    problems = []
    for name, ops in sorted(forms.items()):
        if ":?" not in ops:
            problems.append(f"{name} is a secret compose starts without: write it `${{{name}:?set {name} in .env}}`")
        elif any(op.lstrip(":").startswith("-") for op in ops):
            problems.append(f"{name} has a default somewhere: a secret must be set, never defaulted")
    return problems


def _block(text: str, name: str) -> str | None:
    """The body of the first `name { … }` block of a nats-server config (nested braces included)."""
    match = re.search(rf"(?m)^\s*{re.escape(name)}\s*\{{", text)
    if match is None:
        return None
    depth, start = 1, match.end()
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return text[start:]


def check_nats_routes(compose: dict[str, Any]) -> list[str]:
    """Clustered NATS nodes (`--routes` or routes in their config) route only over TLS that verifies peers."""
    problems = []
    for name, service in sorted(compose.get("services", {}).items()):
        conf = "\n".join(c for t, c in service_configs(compose, name).items() if t.endswith(".conf"))
        cluster = _block(conf, "cluster")
        if "--routes" not in command_text(service) and "routes" not in (cluster or ""):
            continue
        tls = _block(cluster or "", "tls")
        if tls is None:
            problems.append(f"service {name}: cluster routes have no tls block (plaintext routes)")
        elif not re.search(r"verify\s*:\s*true", tls) or "ca_file" not in tls:
            problems.append(
                f"service {name}: cluster routes accept peers without a certificate (cluster tls needs verify: true "
                "and ca_file)"
            )
    return problems


def check_key_mounts(compose: dict[str, Any]) -> list[str]:
    """No Airflow service (a Celery worker runs cells, and so any code a matrix brings) mounts the brokers' keys."""
    certs = certificate_service(compose)
    if certs is None or certs.key_volume == certs.ca_volume:
        return [] if certs is None else [f"service {certs.service} writes no CA-only volume (--ca-out) for clients"]
    problems = []
    for name in sorted(airflow_services(compose)):
        for target, volume in sorted(volume_mounts(compose["services"][name]).items()):
            if volume == certs.key_volume:
                problems.append(
                    f"service {name} mounts {volume} (the brokers' private keys) at {target}; a worker needs only "
                    f"the CA ({certs.ca_volume})"
                )
    return problems
