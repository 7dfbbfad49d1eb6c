"""The live web view of a cluster (bhandar web): a state snapshot, a server, a page."""
