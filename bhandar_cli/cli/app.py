"""The `bhandar` command line (typer): parses arguments and hands off; no store logic here.

Heavy modules (trio, the store) are imported inside the commands that need them so that
`bhandar --help` stays fast.
"""

from __future__ import annotations

import inspect
import os
import sys

import typer

from bhandar_cli import __version__
from bhandar_cli.cli.bench_big_cmd import big as bench_big
from bhandar_cli.cli.bench_check_cmd import bench_check
from bhandar_cli.cli.bench_cli_cmd import bench_cli
from bhandar_cli.cli.bench_cmd import bench_app
from bhandar_cli.cli.bench_etcd_cmd import etcd as bench_etcd
from bhandar_cli.cli.bench_repair_cmd import repair as bench_repair
from bhandar_cli.cli.bench_security_cmd import security as bench_security
from bhandar_cli.cli.bulk_cmd import export, import_
from bhandar_cli.cli.chaos_cmd import chaos
from bhandar_cli.cli.check_cmd import check
from bhandar_cli.cli.cluster_cmd import cluster_app
from bhandar_cli.cli.cluster_pki_cmd import cert as cluster_cert
from bhandar_cli.cli.cluster_pki_cmd import init as cluster_init
from bhandar_cli.cli.cluster_upgrade_cmd import upgrade as cluster_upgrade
from bhandar_cli.cli.config_cmd import config_app
from bhandar_cli.cli.data_cmd import delete, get, incr, put
from bhandar_cli.cli.demo_cmd import demo
from bhandar_cli.cli.hot_cmd import hot
from bhandar_cli.cli.join_token_cmd import join_token_app
from bhandar_cli.cli.keyspace_cmd import keyspace_app
from bhandar_cli.cli.node_cmd import node_app
from bhandar_cli.cli.pipe_cmd import pipe
from bhandar_cli.cli.repl_cmd import repl
from bhandar_cli.cli.sim_cmd import sim_app
from bhandar_cli.cli.soak_cmd import soak
from bhandar_cli.cli.token_cmd import token_app
from bhandar_cli.cli.web_cmd import web

# What typer raises for a command line it cannot take (typer >= 0.25 carries its own click and
# names the base class itself; pyproject.toml pins typer to a release that does).
COMMAND_LINE_ERROR = typer.TyperException

app = typer.Typer(
    name="bhandar",
    help="Bhandar: a Dynamo-style replicated key-value store you can run, break and watch.",
    rich_markup_mode="rich",
    no_args_is_help=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("repl")(repl)
app.command("demo")(demo)
app.command("chaos")(chaos)
app.command("check")(check)
app.command("get")(get)
app.command("put")(put)
app.command("delete")(delete)
# A negative DELTA (`incr counters visits -2`) is an argument, not an unknown option.
app.command("incr", context_settings={"ignore_unknown_options": True})(incr)
app.command("pipe")(pipe)
app.command("export")(export)
app.command("import")(import_)
app.command("soak")(soak)
app.command("hot")(hot)
app.command("web")(web)
app.add_typer(keyspace_app, name="keyspace")
app.add_typer(config_app, name="config")
bench_app.command("security")(bench_security)
bench_app.command("etcd")(bench_etcd)
bench_app.command("repair")(bench_repair)
bench_app.command("big")(bench_big)
bench_app.command("cli")(bench_cli)
bench_app.command("check")(bench_check)
app.add_typer(bench_app, name="bench")
cluster_app.command("init")(cluster_init)
cluster_app.command("cert")(cluster_cert)
cluster_app.command("upgrade")(cluster_upgrade)
cluster_app.add_typer(join_token_app, name="join-token")
cluster_app.add_typer(token_app, name="token")
app.add_typer(cluster_app, name="cluster")
app.add_typer(node_app, name="node")
app.add_typer(sim_app, name="sim")


def _one_line_summaries(commands: typer.Typer) -> None:
    """Each command's line in a group's command list: its docstring's first paragraph, on one line.
    In rich markup mode typer keeps a docstring's line breaks there, so a summary wrapped in the
    source came out ragged in `bhandar --help` (its own -h page rewraps it, and says all of it)."""
    for info in commands.registered_commands:
        if info.short_help is None and info.callback is not None and info.callback.__doc__:
            first = inspect.cleandoc(info.callback.__doc__).split("\n\n")[0]
            info.short_help = " ".join(first.split())
    for group in commands.registered_groups:
        if group.typer_instance is not None:
            _one_line_summaries(group.typer_instance)


_one_line_summaries(app)


def _version(value: bool) -> None:
    if value:
        from bhandar_cli import native

        typer.echo(f"bhandar {__version__}, hot path {native.describe()}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Bhandar: a Dynamo-style replicated key-value store you can run, break and watch.

    Run [bold]bhandar[/bold] alone to open the REPL on an in-process cluster.
    """
    if ctx.invoked_subcommand is None:
        # The click command (not the bare function) so that the options' defaults apply.
        command = ctx.command.get_command(ctx, "repl")  # type: ignore[attr-defined]
        ctx.invoke(command)


def main() -> None:
    # Cluster files, keys, logs and data: whatever a command creates is its owner's only.
    os.umask(0o077)
    # Not standalone: typer would draw a usage error as a box of five lines, which a script
    # reading stderr cannot use. Each error here is one line; the exit codes stay click's.
    try:
        code = app(prog_name="bhandar", standalone_mode=False)
    except COMMAND_LINE_ERROR as error:
        if error_message(error):  # none: the group's help, asked for by giving no command, is out
            sys.stderr.write(usage_error_line(error) + "\n")
        sys.exit(error.exit_code)
    except typer.Abort:
        sys.stderr.write("bhandar: aborted\n")
        sys.exit(1)
    # A command returns None; an int is the code of an Exit (typer.Exit, Ctrl-C's 130, --help's 0).
    sys.exit(code if isinstance(code, int) else 0)


def error_message(error: typer.TyperException) -> str:
    return str(error.format_message()).rstrip(".")


def usage_error_line(error: typer.TyperException) -> str:
    """One line: `bhandar get: missing argument 'KEY' (usage: bhandar get [OPTIONS] KS KEY; bhandar
    get -h explains)`; without the usage for an error that is not about the command line's shape."""
    message = error_message(error)
    message = message[:1].lower() + message[1:]
    ctx = getattr(error, "ctx", None)
    if ctx is None:
        return f"bhandar: {message}"
    usage = " ".join(ctx.get_usage().removeprefix("Usage: ").replace("{", "").replace("}", "").split())
    return f"{ctx.command_path}: {message} (usage: {usage}; {ctx.command_path} -h explains)"


if __name__ == "__main__":
    main()
    sys.exit(0)
