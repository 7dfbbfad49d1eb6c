"""The trio node runtime: a node's lives on trio (runtime.py), a node process (process.py) with its
RPC service, admin views and timers; the wire in net/, the HTTP gateway in http/."""
