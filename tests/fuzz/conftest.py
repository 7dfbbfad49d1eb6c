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

# ci: few examples, derandomized so a failure replays on any machine; long: many, random.
for name, examples, derandomize in (("ci", CI_EXAMPLES, True), ("long", LONG_EXAMPLES, False)):
    settings.register_profile(
        name,
        max_examples=examples,
        deadline=None,
        derandomize=derandomize,
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
