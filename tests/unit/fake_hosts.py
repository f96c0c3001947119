"""Two "hosts" that are really this machine, for tests of multi-node launches until a
harness with network namespaces replaces them.

The hosts are 127.0.0.2 and 127.0.0.3: loopback addresses that neither MPI takes for this
machine, so both start their daemons on them through the launcher (ssh), here a script that
drops ssh's options and the host and runs the command locally. Shared memory is turned off so
that ranks talk over TCP on the loopback: MPICH (its UCX netmod) is told to use TCP only;
OpenMPI's command line already picks its BTLs (dhir passes `--mca btl ^ofi`), so its
shared-memory BTL is made the least preferred instead, and TCP is allowed on the loopback.
"""

import json
from pathlib import Path

HOSTS = ("127.0.0.2", "127.0.0.3")

_AGENT = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-l|-i) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
echo "$*" >> "{log}"
exec sh -c "$*"
"""


def launcher_env(directory: Path, mpi: str) -> dict[str, str]:
    """The environment that makes `mpi`'s mpirun reach HOSTS through the local agent (its
    calls are logged to directory/agent.log) and its ranks talk over TCP."""
    agent = directory / "agent.sh"
    agent.write_text(_AGENT.format(log=directory / "agent.log"))
    agent.chmod(0o755)
    if mpi == "mpich":  # Hydra 5.0
        return {
            "HYDRA_LAUNCHER": "ssh",
            "HYDRA_LAUNCHER_EXEC": str(agent),
            "MPIR_CVAR_NOLOCAL": "1",
            "UCX_TLS": "tcp,self",
            "FI_PROVIDER": "tcp",
        }
    # OpenMPI 5 launches through PRRTE, which reads PRTE_MCA_*, not OMPI_MCA_plm_rsh_agent.
    return {
        "PRTE_MCA_plm_ssh_agent": str(agent),
        "OMPI_MCA_btl_sm_exclusivity": "0",
        "OMPI_MCA_btl_tcp_if_include": "lo",
    }


def agent_calls(directory: Path) -> list[str]:
    log = directory / "agent.log"
    return log.read_text().splitlines() if log.is_file() else []


def two_node_description(path: Path, ranks_per_node: int = 2) -> Path:
    """Two nodes, each one CPU of `ranks_per_node` ranks, on HOSTS; links left to guesses."""

    def node(k: int) -> dict[str, object]:
        cpu = {"name": f"n{k}.cpu", "arch": "x86_64", "peak_gflops": 50.0, "mem_bw_gbs": 20.0,
               "memory_bytes": 1 << 33, "cores": 2, "ranks": ranks_per_node}  # fmt: skip
        return {"name": f"n{k}", "host": HOSTS[k], "devices": [cpu]}

    path.write_text(json.dumps({"nodes": [node(0), node(1)]}))
    return path
