"""The RABBITMQ_HOME a cell's nodes run from: the package's release folder with only the server's applications.

Why: the package's script puts its whole `plugins` folder on the VM's code path (`ERL_LIBS`): RabbitMQ 3.10.8's 20
applications and 51 optional plugins (management, MQTT, STOMP, federation, …), 93 code-path folders in all. No
cell enables a plugin (every node's `enabled_plugins` is `[]`), so the 51 are never started, yet each of the ~950
modules a node loads while booting is looked up along that path folder by folder, and the plugins' config
schemas are read. A home whose `plugins` folder holds only the dependency closure of `rabbit` and
`rabbitmq_prelaunch` (read from their `.app` files) boots the same applications (33 with OTP's) on the same
config: a node was ready in ~2.0 s instead of ~4.0 s on a 2-core host.

The home is links only (into the package's release folder), made under the cluster's workdir: nothing outside
the workdir is written, and the package stays as installed. Its `sbin` is the package's, run through the home
(`RABBITMQ_SCRIPTS_DIR`), so the script derives `RABBITMQ_HOME` and its plugins folder from it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ...errors import BrokerError

# What `rabbitmq-server` boots: the prelaunch application, then `rabbit` with everything it depends on.
BOOT_ROOTS: tuple[str, ...] = ("rabbitmq_prelaunch", "rabbit")

_APP_LIST = r"\{\s*%s\s*,\s*\[([^\]]*)\]"


def app_dependencies(app_file: Path) -> set[str]:
    """The applications an `.app` file names as `applications` and `included_applications`."""
    text = app_file.read_text(errors="replace")
    names: set[str] = set()
    for key in ("applications", "included_applications"):
        found = re.search(_APP_LIST % key, text)
        if found:
            names |= {part.strip().strip("'") for part in found[1].split(",") if part.strip()}
    return names


def plugin_folders(plugins_dir: Path) -> dict[str, Path]:
    """Application name → its folder (`rabbit-3.10.8` → `rabbit`) for every application in `plugins_dir`."""
    folders = {}
    for folder in sorted(plugins_dir.iterdir()):
        name = folder.name.rsplit("-", 1)[0]
        if folder.is_dir() and (folder / "ebin" / f"{name}.app").is_file():
            folders[name] = folder
    return folders


def boot_closure(plugins_dir: Path, roots: tuple[str, ...] = BOOT_ROOTS) -> dict[str, Path]:
    """The applications of `plugins_dir` that `roots` need, transitively (OTP's own, such as `mnesia` and `ssl`,
    live in Erlang's lib folder and are not in it). Raises BrokerError when a root is missing."""
    folders = plugin_folders(plugins_dir)
    missing = [root for root in roots if root not in folders]
    if missing:
        raise BrokerError(f"{plugins_dir} has no {', '.join(missing)} application: reinstall rabbitmq-server")
    needed: dict[str, Path] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in needed or name not in folders:
            continue
        needed[name] = folders[name]
        todo.extend(app_dependencies(folders[name] / "ebin" / f"{name}.app"))
    return dict(sorted(needed.items()))


def write_home(release_dir: Path, home: Path) -> list[str]:
    """Make `home`: a link to every entry of the package's release folder but `plugins`, and a `plugins` folder
    of links to the boot closure. Returns the linked application folders (e.g. `rabbit-3.10.8`), which the
    cell records."""
    apps = boot_closure(release_dir / "plugins")
    shutil.rmtree(home, ignore_errors=True)
    (home / "plugins").mkdir(parents=True)
    for entry in sorted(release_dir.iterdir()):
        if entry.name != "plugins":
            (home / entry.name).symlink_to(entry)
    for folder in apps.values():
        (home / "plugins" / folder.name).symlink_to(folder)
    return [folder.name for folder in apps.values()]
