"""Procedures: tasks of many steps the client runs across nodes, each step watched (rolling upgrade,
configuration rollout, bulk, pipeline, joining, issuing an access token)."""
