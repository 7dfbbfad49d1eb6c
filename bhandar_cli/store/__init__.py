"""The core's record store on the LSM engine: the records' encoding on disk, and opening a
node's data directory."""
