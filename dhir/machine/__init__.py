"""The machine description: the nodes, devices, links and ranks of a cluster (docs/machine.md).

description.py holds the dataclasses; files.py reads and writes TOML and JSON, dlti.py
carries a description in a module as DLTI attributes, detect.py finds this machine's,
layout.py lays ranks out on nodes (`dhir run --system`), roofline.py times work on a
device. `dhir calibrate` (dhir.toolchain.calibrate) measures this machine.
"""
