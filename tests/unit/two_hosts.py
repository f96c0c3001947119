"""Two "hosts" on this machine for runs over TCP: network namespaces joined by a veth pair,
each with its own hostname and boot id (scripts/two_hosts.sh), and `dhir run` started on
the first with the MPI launchers reaching the second through an ssh stand-in."""

import os
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "two_hosts.sh"
REPO = SCRIPT.parents[1]


class Unavailable(Exception):
    """Namespaces cannot be made here (not root, no `ip`, no CAP_NET_ADMIN)."""


@dataclass(frozen=True)
class TwoHosts:
    name: str
    directory: Path

    @property
    def hosts(self) -> tuple[str, str]:
        return (f"{self.name}0", f"{self.name}1")

    def env(self) -> dict[str, str]:
        """The variables (from DIR/env) that send both MPIs' launchers through the agent."""
        found: dict[str, str] = {}
        for line in (self.directory / "env").read_text().splitlines():
            for word in shlex.split(line)[1:]:
                key, _, value = word.partition("=")
                found[key] = value
        return found

    def run(
        self, host: str, command: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """`command` on `host`, with this environment plus `env` and this dhir first on
        the Python path, in the repository's root."""
        full = dict(os.environ, **self.env(), **env)
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
        line = f"cd {shlex.quote(str(REPO))} && exec {shlex.join(command)}"
        return subprocess.run(
            [str(self.directory / "host"), host, line],
            env=full,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def link_bytes(self) -> tuple[int, int]:
        """(sent, received) bytes so far on the first host's end of the veth pair."""
        counts = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                self.hosts[0],
                "cat",
                f"/sys/class/net/{self.name}v0/statistics/tx_bytes",
                f"/sys/class/net/{self.name}v0/statistics/rx_bytes",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return int(counts[0]), int(counts[1])

    def system_toml(self, ranks_per_node: int) -> str:
        """A description of the two hosts: one CPU each, `ranks_per_node` ranks on it."""
        nodes = [
            f'[[nodes]]\nname = "host{i}"\nhost = "{host}"\n\n'
            f'[[nodes.devices]]\nname = "host{i}.cpu"\narch = "x86_64"\n'
            f"cores = {ranks_per_node}\nranks = {ranks_per_node}\n"
            for i, host in enumerate(self.hosts)
        ]
        return 'name = "two-hosts"\n\n' + "\n".join(nodes)


@contextmanager
def two_hosts(name: str, directory: Path) -> Iterator[TwoHosts]:
    """Hosts NAME0 and NAME1 while the block runs; removed afterwards, even on failure.
    Raises Unavailable (with the reason) where they cannot be made."""
    if os.geteuid() != 0:
        raise Unavailable("network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
    try:
        made = subprocess.run(
            ["sh", str(SCRIPT), "up", name, str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Unavailable(f"{SCRIPT.name} up failed: {error}") from None
    if made.returncode != 0:
        raise Unavailable(f"{SCRIPT.name} up failed: {made.stderr.strip()}")
    try:
        yield TwoHosts(name, directory)
    finally:
        subprocess.run(["sh", str(SCRIPT), "down", name, str(directory)], check=False)
