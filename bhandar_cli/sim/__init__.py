"""Deterministic simulation: the seed's simulators, a seeded event loop and the chaos checker."""
