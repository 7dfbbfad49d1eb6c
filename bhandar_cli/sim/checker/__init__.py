"""The chaos checker: what a history of client operations must satisfy."""
