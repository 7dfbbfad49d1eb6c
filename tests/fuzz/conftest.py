"""Hypothesis profiles for the fuzz tests: bounded and reproducible in the suite, long on demand.

`BHANDAR_FUZZ=long pytest tests/fuzz` runs a campaign: a hundred times the examples, random
(not derandomized), so each run explores new inputs. The default `ci` profile is derandomized, so
a failure in CI reproduces on any machine. The fuzz tests take their settings from `fuzz_settings`
rather than loading a profile globally, so the rest of the suite keeps hypothesis's defaults.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CI_EXAMPLES = 200
LONG_EXAMPLES = 20_000

settings.register_profile(
    "ci",
    max_examples=CI_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "long",
    max_examples=LONG_EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
PROFILE = os.environ.get("BHANDAR_FUZZ", "ci")
if PROFILE not in ("ci", "long"):
    raise ValueError(f"BHANDAR_FUZZ must be 'ci' or 'long', not {PROFILE!r}")


def fuzz_settings(share: float = 1.0) -> settings:
    """The active profile, with `share` of its examples (for tests that cost a cluster each)."""
    base = settings.get_profile(PROFILE)
    return settings(base, max_examples=max(1, int(base.max_examples * share)))
