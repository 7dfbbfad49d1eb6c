"""How a client reaches a cluster: in-process, over TCP, or one blocking request at a time."""
