"""Asking a running RabbitMQ node a question over Erlang distribution, with OTP's own `erl_call`.

`rabbitmqctl` boots a whole Erlang VM per call (a second or more of CPU on a busy 2-core host, beside the broker
being measured); `erl_call` is OTP's small C client of the distribution protocol (erl_interface, shipped with
erlang-base): it connects straight to the node's distribution port (`-address`, no epmd lookup), evaluates one
expression there and prints `{ok, Result}` in a few milliseconds. The cookie is read from `$HOME/.erlang.cookie`,
so it never appears on a command line. Expressions here return one flat string, so reading the answer needs no
Erlang term parser.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

_ANSWER = re.compile(r'^\{ok,\s*"(?P<text>[^"\\]*)"\}$', re.DOTALL)


def node_name(index: int, host: str) -> str:
    """Erlang node name of node `index` (1-based): long names on the host's address, so nodes and the harness
    reach each other from any network namespace without a resolver."""
    return f"n{index}@{host}"


def node_index(name: str) -> int | None:
    """Inverse of `node_name`; None for a name the harness did not give (or an empty answer)."""
    local = name.strip().strip("'").split("@", 1)[0]
    return int(local[1:]) if local.startswith("n") and local[1:].isdigit() else None


def strings(items: str) -> str:
    """An Erlang expression joining the atoms of list expression `items` into one space-separated string."""
    return f'string:join([atom_to_list(A) || A <- {items}], " ")'


def binary(text: str) -> str:
    """`text` as an Erlang binary literal (queue and vhost names)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'<<"{escaped}">>'


def evaluate(host: str, dist_port: int, expr: str, home: Path, timeout_s: float = 2.0) -> str | None:
    """Evaluate `expr` (one expression returning a flat string) on the node listening for distribution at
    `host:dist_port`; its text, or None when the node does not answer in time or the expression fails there."""
    argv = ["erl_call", "-address", f"{host}:{dist_port}", "-timeout", str(max(1, math.ceil(timeout_s))), "-e"]
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    try:
        done = subprocess.run(
            argv, input=f"{expr}.\n", capture_output=True, text=True, env=env, timeout=timeout_s + 2, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    found = _ANSWER.match(done.stdout.strip())
    return found["text"] if done.returncode == 0 and found else None


def _lookup(route: str, found: str) -> str:
    """An expression giving `found` (which may use the queue record `Q`) for queue `route` in vhost '/', or ""."""
    name = f'rabbit_misc:r(<<"/">>, queue, {binary(route)})'
    return f'case rabbit_amqqueue:lookup({name}) of {{ok, Q}} -> {found}; _ -> "" end'


# From the queue record alone (no call to the queue's processes, which may sit on a frozen node): a quorum
# queue's pid field is {RaName, LeaderNode}, a stream's and a classic queue's a pid on the leader's (home) node.
_LEADER = (
    "case amqqueue:get_pid(Q) of {_, L} when is_atom(L) -> atom_to_list(L); "
    'P when is_pid(P) -> atom_to_list(node(P)); _ -> "" end'
)
# Quorum queues and streams keep their replica nodes in the record's type state.
_MEMBERS = strings(
    "case amqqueue:get_type_state(Q) of #{nodes := Ns} when is_list(Ns) -> Ns; "
    "_ -> case amqqueue:get_pid(Q) of P when is_pid(P) -> [node(P)]; _ -> [] end end"
)


def leader_expr(route: str) -> str:
    return _lookup(route, _LEADER)


def members_expr(route: str) -> str:
    return _lookup(route, _MEMBERS)
