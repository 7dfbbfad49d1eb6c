"""The wire between nodes and clients on trio: CBOR frames, TLS streams, the transport, RPC."""
