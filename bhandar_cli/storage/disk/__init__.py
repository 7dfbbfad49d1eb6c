"""The storage engine's disk layer: the `Disk` interface, the real disk and its sync worker,
the data directory's lock, and the simulated disk of crash tests."""
