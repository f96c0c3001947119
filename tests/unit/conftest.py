import shutil

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("mlir-opt-22") is None:
        skip = pytest.mark.skip(reason="mlir-opt-22 not installed (run scripts/setup.sh)")
        for item in items:
            if "mlir" in item.keywords:
                item.add_marker(skip)
