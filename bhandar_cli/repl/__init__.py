"""The REPL: command grammar, execution through client.py, and rich views."""
