"""Rate limits per token on one node: a token bucket per token id, handed the time (`now`).

A bucket holds up to `burst` requests and refills at `rate` per second; a request takes one. Past
the limit the caller learns how long until one request passes again. Each node keeps its own
buckets (a token's rate is per node: no coordination on the request path).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bhandar_cli.core.model import TokenRecord

# A client sending at exactly the rate must pass: refills summed in floating point fall short of
# a whole request by a rounding error now and then.
_SLACK = 1e-9


@dataclass
class TokenBucket:
    rate: float  # requests per second, > 0
    burst: float  # the most held at once, >= 1
    level: float
    updated: float

    @classmethod
    def full(cls, rate: float, burst: int, now: float) -> TokenBucket:
        size = float(burst) if burst > 0 else max(1.0, math.ceil(rate))
        return cls(rate, size, size, now)

    def take(self, now: float) -> float:
        """Take one request: 0.0 when it passes, else the seconds until one would."""
        elapsed = max(0.0, now - self.updated)
        self.level = min(self.burst, self.level + elapsed * self.rate)
        self.updated = max(self.updated, now)
        if self.level >= 1.0 - _SLACK:
            self.level = max(0.0, self.level - 1.0)
            return 0.0
        return (1.0 - self.level) / self.rate


class RateLimiter:
    """The buckets of the tokens that have a rate, on this node."""

    def __init__(self) -> None:
        self._buckets: dict[str, TokenBucket] = {}

    def admit(self, record: TokenRecord, now: float) -> float:
        """0.0 if a request of `record`'s token passes now, else the seconds to wait."""
        if record.rate <= 0:
            return 0.0
        bucket = self._buckets.get(record.id)
        if bucket is None or bucket.rate != record.rate:
            bucket = self._buckets[record.id] = TokenBucket.full(record.rate, record.burst, now)
        return bucket.take(now)
