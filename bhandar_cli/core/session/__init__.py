"""The client session: what one client remembers between its data operations, and how each
operation goes from request to outcome (client_session.py), with no I/O of its own."""
