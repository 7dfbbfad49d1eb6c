"""The sans-I/O core: plain synchronous logic, handed `now` and a `random.Random`.

By concept, each sub-package importing only those before it: model/ (records, versions, values,
configuration, errors, the store interface), protocol/ (messages and effects), membership/ (the
ring, gossip, failure detection), repair/ (Merkle trees, anti-entropy), roles/ (what a node does).
node.py wires the roles into one node and is the only surface a driver uses; node_views.py and
wire.py read across all of it."""
