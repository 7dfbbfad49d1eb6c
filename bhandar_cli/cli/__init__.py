"""The `bhandar` command line: the typer app (app.py), its entry point (launch.py, which runs a
one-shot data command without typer) and one module per command group (`*_cmd.py`). Each command
parses, calls the client and renders."""
