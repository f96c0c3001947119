#!/usr/bin/env bash
# Set up, then run every check: ruff (lint, format; every folder of Python), the type
# checker (basedpyright over dhir/), lit + FileCheck tests, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
status=0
.venv/bin/ruff check dhir tests bench scripts examples || status=1
.venv/bin/ruff format --check dhir tests bench scripts examples || status=1
.venv/bin/basedpyright -p pyproject.toml || status=1
.venv/bin/lit -sv tests/filecheck || status=1
.venv/bin/python -m pytest -q tests/unit || status=1
exit $status
