"""The machine description: the nodes, devices, links and ranks of a cluster (docs/machine.md).

description.py holds the dataclasses; files.py reads and writes TOML and JSON (and
dhir.ir.file_lines finds where in them an error is), dlti.py
carries a description in a module as DLTI attributes, detect.py finds this machine's,
layout.py lays ranks out on nodes (`dhir run --system`), roofline.py times work on a
device. `dhir calibrate` (dhir.toolchain.calibrate) measures this machine.
"""

from typing import TYPE_CHECKING

from dhir.lazy import lazy_names

if TYPE_CHECKING:
    from dhir.machine.description import Device, Link, Node, System
    from dhir.machine.detect import detect, load_local_system
    from dhir.machine.dlti import from_dlti, to_dlti
    from dhir.machine.files import read_system, write_system

# Loaded when first used, as dhir's own API: importing one of these modules loads only
# what it needs.
_MODULE_OF = {
    "Device": "dhir.machine.description",
    "Link": "dhir.machine.description",
    "Node": "dhir.machine.description",
    "System": "dhir.machine.description",
    "detect": "dhir.machine.detect",
    "load_local_system": "dhir.machine.detect",
    "from_dlti": "dhir.machine.dlti",
    "to_dlti": "dhir.machine.dlti",
    "read_system": "dhir.machine.files",
    "write_system": "dhir.machine.files",
}
__all__ = [
    "Device",
    "Link",
    "Node",
    "System",
    "detect",
    "from_dlti",
    "load_local_system",
    "read_system",
    "to_dlti",
    "write_system",
]


__getattr__ = lazy_names(__name__, _MODULE_OF)
