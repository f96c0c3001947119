"""The machine description: the nodes, devices, links and ranks of a cluster (docs/machine.md).

Read from TOML or JSON files, carried in modules as DLTI attributes, detected or measured
on this machine (`dhir calibrate`), and used to lay ranks out on nodes (`dhir run --system`).
"""

from dhir.machine.description import DescriptionError, Device, Link, Node, System, guess_device
from dhir.machine.detect import detect, load_local_system
from dhir.machine.dlti import from_dlti, to_dlti
from dhir.machine.files import default_system_path, read_system, write_system

__all__ = [
    "DescriptionError",
    "Device",
    "Link",
    "Node",
    "System",
    "default_system_path",
    "detect",
    "from_dlti",
    "guess_device",
    "load_local_system",
    "read_system",
    "to_dlti",
    "write_system",
]
