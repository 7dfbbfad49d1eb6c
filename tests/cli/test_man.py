"""The man page: `man/bhandar.1` must be what `scripts/gen_man.py` generates from the current app.

If `test_committed_page_is_current` fails, the command line changed: run
`python scripts/gen_man.py` and commit man/bhandar.1.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "man" / "bhandar.1"


def _load_gen_man() -> ModuleType:
    # scripts/ is not a package; load the script by path.
    spec = importlib.util.spec_from_file_location("gen_man", ROOT / "scripts" / "gen_man.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_man"] = module
    spec.loader.exec_module(module)
    return module


gen_man = _load_gen_man()


def test_committed_page_is_current() -> None:
    committed = PAGE.read_text(encoding="utf-8")
    assert committed == gen_man.render_man(), "man/bhandar.1 is stale: run python scripts/gen_man.py"


def test_every_command_and_option_is_in_the_page() -> None:
    page = PAGE.read_text(encoding="utf-8")
    paths = gen_man.command_paths()
    assert "bhandar sim ring" in paths and "bhandar sim ministore" in paths
    for path in paths:
        assert f".SS {gen_man.arg(path)}\n" in page, path
    for cmd, ctx in gen_man.command_tree():
        for param in cmd.get_params(ctx):
            hidden = getattr(param, "hidden", False)  # test-only switches stay out of the page
            if (
                param.param_type_name == "option"
                and not hidden
                and not set(param.opts) <= set(ctx.help_option_names)
            ):
                for opt in param.opts:
                    assert gen_man.bold(opt) in page, (ctx.command_path, opt)


def test_fixed_sections_and_header() -> None:
    page = gen_man.render_man()
    for title in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "REPL COMMANDS",
        "JSON OUTPUT",
        "EXIT STATUS",
    ):
        assert f"\n.SH {title}\n" in page or f'\n.SH "{title}"\n' in page, title
    assert '\n.SH "ENVIRONMENT"\n' in page and "BHANDAR_CLUSTER" in page
    # No date in .TH (so the page is reproducible) and the package version.
    from bhandar_cli import __version__

    assert f'.TH BHANDAR 1 "" "bhandar {__version__}" "Bhandar Manual"\n' in page
    assert gen_man.render_man() == page
    # The REPL grammar and a JSON shape from DESIGN.md §5 made it in, escaped.
    assert "wait converged [timeout=DURATION]" in page
    assert '{"cmd":"incr","ok":true,"value":N}' in page


def test_repl_commands_section_is_the_command_table() -> None:
    from bhandar_cli.repl.commands import COMMANDS

    page = PAGE.read_text(encoding="utf-8")
    section = page.split('.SH "REPL COMMANDS"\n', 1)[1].split("\n.SH ", 1)[0]
    tags = [line for i, line in enumerate(section.splitlines()) if section.splitlines()[i - 1] == ".TP"]
    assert tags == [gen_man.bold(spec.usage) for spec in COMMANDS]
    for spec in COMMANDS:
        assert gen_man.esc(spec.help) in section, spec.name
        for example in spec.examples:
            assert f"\n{gen_man.esc(example)}\n" in section, example


def test_a_command_added_to_the_table_is_in_the_page() -> None:
    from bhandar_cli.repl.kinds import NODE
    from bhandar_cli.repl.table import Arg, CommandSpec, CommandTable

    async def handler(session: object, cmd: object) -> None: ...

    spec = CommandSpec(
        "echo",
        "say a name back",
        handler,
        (Arg(NODE),),
        aliases=("say",),
        help="Only here.",
        examples=("echo A",),
    )
    lines = gen_man.repl_section(CommandTable([spec]))
    at = lines.index(".TP")
    assert lines[at : at + 3] == [".TP", gen_man.bold("echo NODE"), "Say a name back. Only here. Also: say."]
    assert lines[at + 3 : at + 7] == [".IP", ".nf", "echo A", ".fi"]


def test_failure_codes_are_the_declared_error_codes() -> None:
    from bhandar_cli.core.model import errors

    def kinds(cls: type[errors.BhandarError]) -> set[str]:
        return {cls.code}.union(*(kinds(sub) for sub in cls.__subclasses__()))

    # Each declared code has its error class, and no class has a code of its own.
    assert kinds(errors.BhandarError) == set(errors.ERROR_CODES)
    assert f'"code":"{"|".join(errors.ERROR_CODES)}|..."' in gen_man.render_man()


REQUESTS = {".TH", ".SH", ".SS", ".PP", ".TP", ".IP", ".RS", ".RE", ".nf", ".fi", ".br", ".nh", '.\\"'}


def test_no_text_line_is_read_as_a_request() -> None:
    for line in gen_man.render_man().splitlines():
        if line.startswith((".", "'")):
            assert line.split(" ")[0] in REQUESTS, line
        # Hyphens are always escaped, so no bare "-" survives outside the comment line.
        if not line.startswith('.\\"'):
            assert "-" not in line.replace("\\-", ""), line
        assert line.isascii(), line


@pytest.mark.parametrize(
    ("text", "roff"),
    [
        (".hidden", "\\&.hidden"),
        ("'quoted'", "\\(aqquoted\\(aq"),
        ("--seed", "\\-\\-seed"),
        ("a\\b", "a\\eb"),
        ("`x`", "\\(gax\\(ga"),
        ("ভা", "\\[u09AD]\\[u09BE]"),
    ],
)
def test_escape(text: str, roff: str) -> None:
    assert gen_man.esc(text) == roff


def test_macro_argument_quotes() -> None:
    assert gen_man.arg('say "hi"') == '"say \\(dqhi\\(dq"'


def test_rich_markup_is_stripped_but_brackets_stay() -> None:
    assert gen_man.clean_help("Run [bold]bhandar[/bold] alone.\n\nUsage: x [OPTIONS]  [default: 3]") == [
        "Run bhandar alone.",
        "Usage: x [OPTIONS] [default: 3]",
    ]


def test_check_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "bhandar.1"
    stale.write_text(gen_man.render_man().replace("Bhandar Manual", "Old Manual"), encoding="utf-8")
    monkeypatch.setattr(gen_man, "PAGE", stale)
    assert gen_man.main(["--check"]) == 1
    assert gen_man.main([]) == 0  # rewrites it
    assert gen_man.main(["--check"]) == 0


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_groff_renders_without_warnings() -> None:
    done = subprocess.run(
        ["groff", "-man", "-ww", "-z"], input=gen_man.render_man(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
