"""What a node does: coordinate, read, write, hold replicas and hints, hand off, stream."""
