"""Who is in the cluster and who is up: the ring, gossip, failure detection."""
