"""A node's HTTP gateway: the API, the Prometheus endpoint, and the ASGI glue."""
