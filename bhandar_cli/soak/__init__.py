"""The soak: a load and a fault schedule on a real process cluster, judged by the chaos checker.

A harness like sim/, on the other side of the drivers: it uses the client over TCP, fleet/'s
supervisor and sim/'s checker, and none of them depends on it.
"""
