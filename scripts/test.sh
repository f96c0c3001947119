#!/usr/bin/env bash
# Set up, then run every test: lit + FileCheck tests, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
status=0
.venv/bin/lit -sv tests/filecheck || status=1
.venv/bin/python -m pytest -q tests/unit || status=1
exit $status
