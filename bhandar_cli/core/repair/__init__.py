"""Replicas agreeing again: Merkle trees, the hash index, anti-entropy, reaping, damage."""
