"""Per-node storage: the LSM engine (WAL, memtable, SSTables, Bloom filters) over a Disk."""
