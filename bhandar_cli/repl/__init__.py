"""The REPL: command grammar, execution through client/client.py, and rich views."""
