"""Hypothesis settings of the random-program tests: derandomized by default, so the same
programs every run keep the suite's time steady; DHIR_HYPOTHESIS=heavy runs ten times as
many, with a fresh seed each time."""

import os

from hypothesis import HealthCheck, settings

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"


def profile(examples: int, *, filtering: bool = False) -> settings:
    """Settings for `examples` programs (ten times as many when heavy); `filtering` for a
    strategy that filters out many of the programs it draws."""
    checks = [HealthCheck.too_slow]
    if filtering:
        checks.append(HealthCheck.filter_too_much)
    return settings(
        max_examples=examples * 10 if HEAVY else examples,
        derandomize=not HEAVY,
        deadline=None,
        suppress_health_check=checks,
        print_blob=True,
    )
