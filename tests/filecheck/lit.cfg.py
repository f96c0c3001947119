# lit configuration for dhir's FileCheck tests (`lit tests/filecheck`).
import os
import shutil
import sys

import lit.formats

config.name = "dhir"  # noqa: F821 (lit provides `config`)
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "inputs"]

# dhir-opt and filecheck come from the Python environment that runs lit.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
# A checkout's own dhir when PYTHONPATH points at it (the environment may hold another's).
if "PYTHONPATH" in os.environ:
    config.environment["PYTHONPATH"] = os.environ["PYTHONPATH"]

if shutil.which("mlir-opt-22"):
    config.available_features.add("mlir")
