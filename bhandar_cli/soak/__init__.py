"""The soak: a load and a fault schedule on a real process cluster, judged by the chaos checker.

A harness like sim/, on the other side of the drivers: it uses node/ (the TCP client, the
supervisor) and sim/'s checker, and neither depends on it.
"""
