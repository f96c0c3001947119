"""`python -m dhir ...`: the dhir command, for environments without its script on PATH."""

import sys

from dhir.cli.main import main

sys.exit(main())
