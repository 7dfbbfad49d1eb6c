"""Generate `man/bhandar.1` (roff) from the typer app, plus the fixed sections written here.

    python scripts/gen_man.py          write man/bhandar.1
    python scripts/gen_man.py --check  exit 1 if the committed page differs from a fresh one

The COMMANDS and SYNOPSIS sections come from the click command tree that typer builds
(`typer.main.get_command`): every group and command, recursively, with usage, help, arguments
and options with their defaults. REPL COMMANDS comes from the REPL's command table
(`bhandar_cli.repl.commands.COMMANDS`): usage, summary, help, aliases and examples of each entry.
SCRIPTS comes from the script rules (`bhandar_cli.repl.script_rules.SCRIPT_RULES`), the rows
the tests run. DESCRIPTION, LIMITS, DELETE, JSON OUTPUT, HTTP API, SECURITY, EXIT STATUS,
ENVIRONMENT, FILES and SEE ALSO are fixed text below, with the consistency levels, error codes
and limits read from their declarations. The output carries no date and nothing from the
environment, so the same code always gives the same page and `tests/cli/test_man.py` can tell when
the committed page is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from bhandar_cli import __version__
from bhandar_cli.cli.app import app
from bhandar_cli.core.model import limits
from bhandar_cli.core.model.config import KEYSPACE_NAME_RULE, LEVELS
from bhandar_cli.core.model.errors import ERROR_CODES
from bhandar_cli.core.model.keyspaces import MAX_KEYSPACES
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.script_rules import SCRIPT_RULES, STATUS_ORDER
from bhandar_cli.repl.table import CommandTable

PAGE = Path(__file__).resolve().parent.parent / "man" / "bhandar.1"
PROG = "bhandar"

# --- roff escaping ------------------------------------------------------------------------------


def esc(text: str) -> str:
    """Escape text for a roff text line (or a macro argument, see `arg`).

    Backslashes first (they start every escape), hyphens as `\\-` so options print as plain
    ASCII hyphen-minus and can be copied, quotes as their glyph escapes (a leading apostrophe
    would be read as a control line, and groff may curl a plain one), and anything outside
    ASCII as `\\[uXXXX]` so the page does not depend on the reader's input encoding.
    """
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\e")
        elif ch == "-":
            out.append("\\-")
        elif ch == "'":
            out.append("\\(aq")
        elif ch == "`":
            out.append("\\(ga")
        elif ord(ch) > 126:
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
    line = "".join(out)
    # A line starting with "." is a request; the zero-width `\&` makes it text.
    return "\\&" + line if line.startswith(".") else line


def arg(text: str) -> str:
    """A quoted macro argument (for .SS and .TP tags): double quotes become `\\(dq`."""
    return '"' + esc(text).replace('"', "\\(dq") + '"'


def bold(text: str) -> str:
    return f"\\fB{esc(text)}\\fR"


def italic(text: str) -> str:
    return f"\\fI{esc(text)}\\fR"


def para(text: str) -> list[str]:
    """A filled paragraph; leading blanks would cause a break, so the text is stripped."""
    return [".PP", esc(" ".join(text.split()))]


def example(lines: str) -> list[str]:
    """A no-fill block, indented, printed as written."""
    body = [esc(line) if line else "" for line in lines.strip("\n").splitlines()]
    return [".PP", ".RS 4", ".nf", *body, ".fi", ".RE"]


def item(tag: str, text: str) -> list[str]:
    """A tagged paragraph; `tag` is roff already (built with `bold`/`italic`)."""
    return [".TP", tag, esc(" ".join(text.split()))]


# --- the command tree ---------------------------------------------------------------------------

# Rich markup that typer renders in --help (e.g. "[bold]bhandar[/bold]") but a man page must not
# show. Only style tags: "[OPTIONS]" or "[default: 3]" are text.
_RICH_TAG = re.compile(
    r"\[/?(?:(?:not +)?(?:bold|dim|italic|underline|strike|reverse|blink|b|i|u|s|code|link[^\]]*|"
    r"red|green|yellow|blue|magenta|cyan|white|black|bright_\w+)(?: +[a-z_ ]+)?)?\]"
)


def clean_help(text: str | None) -> list[str]:
    """Help text as paragraphs, without rich tags or click's `\\b` no-rewrap markers."""
    if not text:
        return []
    text = _RICH_TAG.sub("", text).replace("\\[", "[")
    paragraphs = re.split(r"\n\s*\n", text.strip())
    out = []
    for p in paragraphs:
        lines = [line for line in p.splitlines() if line.strip() != "\b"]
        joined = " ".join(" ".join(lines).split())
        if joined:
            out.append(joined)
    return out


def _contexts(cmd: Any, name: str, parent: Any = None) -> Iterator[tuple[Any, Any]]:
    """Every (command, context) in the tree, depth first, in the order the app declares them."""
    ctx = cmd.context_class(cmd, info_name=name, parent=parent, **(cmd.context_settings or {}))
    yield cmd, ctx
    if hasattr(cmd, "list_commands"):
        for sub_name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, sub_name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _contexts(sub, sub_name, ctx)


def command_tree() -> list[tuple[Any, Any]]:
    return list(_contexts(typer.main.get_command(app), PROG))


def command_paths() -> list[str]:
    """Every command's full name ("bhandar sim ring"), for the tests."""
    return [ctx.command_path for _, ctx in command_tree()]


def _usage(cmd: Any, ctx: Any) -> str:
    return " ".join(cmd.collect_usage_pieces(ctx))


def _param_tag(param: Any, ctx: Any) -> str:
    if param.param_type_name == "argument":
        return italic((param.metavar or param.name or "").upper())
    names = ", ".join(bold(o) for o in param.opts)
    if param.secondary_opts:
        names += " / " + ", ".join(bold(o) for o in param.secondary_opts)
    if param.is_flag or getattr(param, "count", False):
        return names
    display = getattr(param, "display_type_rich", None)
    metavar = display(ctx) if display is not None else param.make_metavar(ctx)
    return f"{names} {italic(metavar)}" if metavar else names


def _param_help(param: Any, ctx: Any) -> str:
    # get_help_record appends "[default: ...; env var: ...; required]" exactly as --help does.
    record = param.get_help_record(ctx) if hasattr(param, "get_help_record") else None
    text = record[1] if record else (getattr(param, "help", None) or "")
    return " ".join(clean_help(text))


def command_section(cmd: Any, ctx: Any) -> list[str]:
    paragraphs = clean_help(cmd.help) or clean_help(getattr(cmd, "short_help", None))
    lines = [f".SS {arg(ctx.command_path)}", f"{bold(ctx.command_path)} {esc(_usage(cmd, ctx))}"]
    for p in paragraphs:
        lines += para(p)
    params = [p for p in cmd.get_params(ctx) if not getattr(p, "hidden", False)]
    help_names = set(ctx.help_option_names)
    params = [p for p in params if not (p.param_type_name == "option" and set(p.opts) <= help_names)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    for title, group in (("Arguments:", arguments), ("Options:", options)):
        if group:
            lines += [".PP", italic(title)]
            for p in group:
                text = _param_help(p, ctx)
                lines += [".TP", _param_tag(p, ctx), *([esc(text)] if text else [])]
    if hasattr(cmd, "list_commands"):
        subs = [c for c in cmd.list_commands(ctx) if not getattr(cmd.get_command(ctx, c), "hidden", False)]
        if subs:
            lines += [".PP", italic("Commands:") + " " + ", ".join(bold(s) for s in subs) + "."]
    return lines


# --- fixed text ----------------------------------------------------------------------------------

DESCRIPTION = [
    f"""Bhandar is a Dynamo-style, leaderless, replicated key-value store that runs on one machine
    so that it can be watched and broken on purpose: consistent hashing with virtual nodes,
    preference lists across zones, quorum reads and writes ({", ".join(LEVELS)}), sloppy quorums
    with hinted handoff, read repair, dotted version vectors with siblings, Merkle-tree
    anti-entropy, gossip membership with a phi-accrual failure detector, and an LSM storage
    engine per node.""",
    """Run bhandar with no command on a terminal to open the interactive REPL on an in-process
    cluster (see REPL COMMANDS). When standard input is not a terminal the REPL reads one command
    per line from it and prints each result as soon as the command completes.""",
    """Output is a table on a terminal and plain text when piped; -o json prints one JSON object
    per command (JSON Lines) with the stable field names listed under JSON OUTPUT. Errors always
    go to standard error, in every output mode. Every command accepts -h and --help.""",
    """bhandar sim runs four small teaching simulations (ring, quorum, versions, ministore) with
    fixed seeds, so a class sees the same tables on every machine, and measures the SSTables' Bloom
    filter against its formula (bloom).""",
]

REPL_SYNTAX = """One command per line; ; separates commands and # starts a comment. Words use
shell-style quoting. Options are name=value words after the arguments. Nodes are named A, B, C, ...
Tab completes commands, arguments and options; help lists the commands and help CMD explains one."""

REPL_BATCH = """Batch mode flushes each command's output as soon as the command completes, so another
program can drive the REPL line by line through a pipe. What stops a script and its exit status:
see SCRIPTS."""

SCRIPTS_TEXT = """bhandar repl runs a script in batch mode: the commands of -e 'CMD; CMD', of --script
FILE, or of standard input when it is not a terminal. A command's place is its line (line 3), with
its place on the line when the line holds several (line 3, command 2); in a one-line -e, its place
on that line (command 2). Every error line names the command it belongs to and its place."""


def scripts_section() -> list[str]:
    """SCRIPTS: one tagged paragraph per row of the script rules, with its example."""
    lines = para(SCRIPTS_TEXT)
    for rule in SCRIPT_RULES:
        lines += item(bold(rule.case), f"{rule.outcome} Exit {rule.status}.")
        lines += [".IP", ".nf", esc(rule.example()), ".fi"]
    return lines + para(STATUS_ORDER)


def repl_section(commands: CommandTable[Any] = COMMANDS) -> list[str]:
    """REPL COMMANDS: every entry of the command table, in its order."""
    lines = para(REPL_SYNTAX)
    for spec in commands:
        text = f"{spec.summary[:1].upper()}{spec.summary[1:]}. {spec.help}"
        if spec.aliases:
            text += f" Also: {', '.join(spec.aliases)}."
        lines += item(bold(spec.usage), text)
        if spec.examples:
            lines += [".IP", ".nf", *(esc(e) for e in spec.examples), ".fi"]
    return lines + para(REPL_BATCH)


JSON_SHAPES = """
get     {"cmd":"get","ok":true,"keyspace":K,"key":K,"found":bool,"values":[...],"context":S,"siblings":N}
put     {"cmd":"put","ok":true,"coordinator":NODE,"acks":N}            (delete: the same)
incr    {"cmd":"incr","ok":true,"value":N}
keyspace {"cmd":"keyspace","ok":true,"name":K,"policy":S,"n":N,"quorum":S,"ttl":SECONDS,"created":bool}
         (keyspace list: {"cmd":"keyspace","ok":true,
          "keyspaces":[{"name":K,"policy":S,"n":N,"quorum":S,"ttl":N}]})
failure {"cmd":...,"ok":false,"error":"human sentence","code":"CODES|..."}
status  {"cmd":"status","nodes":[{"id":"A","zone":"z1","up":true,"status":"normal","tokens":8,
         "owns":0.21,"keys":N,"state":"up","seen_down_by":[...],"group":null}],
         "summary":{"line":"5/5 running","nodes":5,"running":5,"states":{...},"partitions":[],
         "disagree":[...]},"membership":{"from":["A",...],"disagree":[...]}}
         (state: up, joining, leaving, suspected, partitioned, down or left; the nodes are the
         members as the nodes' gossip holds them, a node that joined with a join token included;
         disagree: what their tables differ on, e.g. "E: normal to A, B; not known to C")
prefs   {"cmd":"prefs","replicas":["A","C","E"],"zones":{"A":"z1"},"fallbacks":[...]}
clock   {"cmd":"clock","replicas":{"A":[{"dot":["A",2],"clock":{"A":2},"context":{"A":1},
         "value":V,"tombstone":false}]}}
hints   {"cmd":"hints","queues":[{"holder":"E","target":"D","count":N,"oldest_s":F}]}
merkle  {"cmd":"merkle","a":"A","b":"B","ranges":[{"range":[LO,HI],"equal":bool,"keys":[...]}]}
members {"cmd":"members","from":"A","members":[{"id":"B","heartbeat":N,"phi":F,"up":bool,"status":S}]}
metrics {"cmd":"metrics","ops":{"get":{"QUORUM":{"count":N,"ok":N,"p50_ms":F,"p99_ms":F}}},
         "stale_reads":N,"read_repairs":N,"hints":{"pending":N,"oldest_s":F},"values_expired":N,
         "hot":[top 3 keys of hot],...}
hot     {"cmd":"hot","total_rate":F,"window_s":F,"keys":[{"keyspace":K,"key":K,"rate":F,"share":F,
         "replicas":["A","C","E"],"nodes":{"A":F}}],"nodes":{"A":F},"replica_load":{"A":F}}
"""

JSON_SIM_SHAPES = """
sim ring       {"cmd":"sim ring","ok":true,"seed":N,"keys":N,"nodes":["A","B","C","D"],"joining":"E",
                "rows":[{"vnodes":V,"counts":{"A":N,...},"stddev":F,"max_over_mean":F,"moved":N,"moved_pct":F}],
                "naive_moved":N,"naive_moved_pct":F,"ideal_moved_pct":F}
sim quorum     {"cmd":"sim quorum","ok":true,"seed":N,"rounds":N,"n":3,"timeout_ms":100,
                "down":{"replica":1,"from_round":3000,"until_round":6000},
                "runs":[{"r":R,"w":W,"put_ok":N,"put_ok_pct":F,"get_ok":N,"get_ok_pct":F,
                         "put_p99_ms":F,"get_p99_ms":F,"stale_reads":N}]}
sim versions   {"cmd":"sim versions","ok":true,
                "steps":[{"step":"put","via":"A","items":[...],"clock":{"A":1},"to":[...]},
                {"step":"state","replicas":{"A":[CLOCK,...],...}},{"step":"note","text":S},
                {"step":"compare","a":"v2","b":"v3","relation":"a <= b|b <= a|concurrent"},
                {"step":"get","via":"C","siblings":N,"context":CLOCK,"merged":[...]},
                {"step":"delivered","order":[...],"replicas":{...}},
                {"step":"lww","timestamps":[S,S],"kept":[...],"dropped":[...]}]}
sim ministore  {"cmd":"sim ministore","ok":true,"seed":N,"ops":N,"keys":N,"detect":N,"nodes":[...],"vnodes":8,
                "n":3,"w":2,"r":2,"down":{"D":{"from_op":2000,"until_op":6000},...},
                "modes":[{"mode":S,"ok":N,"tries":N,"availability_pct":F,"stale_reads":N,
                          "hints_stored":N,"hints_delivered":N}]}
"""

JSON_CHAOS_SWARM_SHAPE = """
chaos --swarm  {"start":N,"count":N,"options":{"ops":N,"faults":[...]|null,"storage":S|null,...,
                "jobs":N,"seed_timeout":N},"finished":N,"passed":N,"failed":[{"seed":N,"violation":S,
                "violations":N,"command":S}],"interrupted":bool,"ok":bool,"command":S,"seconds":F}
"""

JSON_CHECK_SHAPE = """
check   {"cmd":"check","ok":bool,"verdict":"valid|invalid|unknown|error","exit":N,"workload":S,
         "program":[S,...],"seed":N,"nodes":["n1",...],"clients":N,"faults":[{"kind":S,"start":F,
         "end":F,"nodes":[...],"amount":F}],"operations":{"ops":N,"ok":N,"fail":N,"info":N},
         "latency_ms":{"p50":F,"p99":F},"messages":{"node":N,"client":N,"service":N,"sent":N,
         "dropped":N},"summary":S,"problems":[{"kind":S,"text":S,"ops":[N,...]}],"stats":{...},
         "staleness":[{"upto_ms":F|null,"fresh":F,"samples":N}],"events":[S],"logs":DIR,"repeat":S,
         "error":S (exit 2 only)}
check --checklist  {"cmd":"check","ok":bool,"checklist":[{"scenario":S,"ops":N,"ok":N,"failed":N,
         "indefinite":N,"lost":N|"-","stale reads":N|"-","p99 ms":F,"verdict":S,"staleness":[...]}],"exit":N,
         "seed":N,"repeat":[S,...]}
"""

HTTP_ENDPOINTS = """
GET    /v1/kv/KS/KEY?consistency=QUORUM     200 {"values":[...],"context":"..."} | 404
PUT    /v1/kv/KS/KEY?consistency=QUORUM     body {"value":...,"context":"..."}    204
DELETE /v1/kv/KS/KEY?consistency=QUORUM&context=...                             204
POST   /v1/kv/KS/KEY/increment              body {"delta":1,"request_id":"..."}   200 {"value":N}
GET    /v1/keyspaces                        200 {"keyspaces":[{"name":K,"policy":S,"n":N,"quorum":S}]}
PUT    /v1/keyspaces/NAME                   body {"policy":"siblings","n":3,"quorum":"sloppy","ttl":0}
                                            201 created | 200 the same exists | 409 defined otherwise
GET    /v1/status                           200 the node's view: members, peers, hints, keys,
                                            hot ({"total_rate":F,"keys":[{"keyspace","key","rate"}]}), ...
GET    /metrics                             200 Prometheus text: bhandar_requests_total
                                            (by op, consistency and outcome),
                                            bhandar_request_latency_seconds (a histogram per op
                                            and consistency), stale reads, hints and their age,
                                            repair ages, storage, load, corruptions, peers
"""

HTTP_TEXT = f"""Each node process serves HTTP on the port cluster status shows (HTTPS with the node's
certificate in a secure cluster: curl --cacert DIR/tls/ca.crt https://127.0.0.1:PORT/...; the
certificate names 127.0.0.1, not localhost; a plain http:// request to it is answered 400 with the
https:// URL to use). A keyspace must be
created (PUT /v1/keyspaces/NAME; every field of the body is optional) before a key of it is read
or written; kv and counters exist from the start. A name is {KEYSPACE_NAME_RULE}, and a cluster
holds at most {MAX_KEYSPACES} keyspaces. Failures answer {{"error":"human sentence","code":CODE}}:
bad input 400, key not found or unknown keyspace 404, too many siblings or a keyspace defined
otherwise 409, too large 413, a body not whole within 30 s 408, unavailable 503, timeout 504. Every
node admits requests by token (only node run --admit-anyone, on loopback, does not): send
Authorization: Bearer TOKEN. No valid token 401 (unauthenticated, with WWW-Authenticate: Bearer), a
token without the role 403 (forbidden), a token past its rate 429 (rate_limited, with Retry-After).
A node serves at most 256 connections, gives a TLS handshake 5 s and closes a connection silent
for 10 s in the middle of a request."""

SECURITY = [
    """cluster up is secure by default: it makes a cluster CA in DIR/tls and a key and certificate
    per node in DATA_DIR/tls, whose name is the node id. Nodes talk mutual TLS: a peer is heard only
    if its certificate, from the cluster CA, names the node it claims to be (and a message naming
    its sender must name that node too); a decommissioned node's certificate is refused. Refusals
    are logged and counted (bhandar_peer_rejections_total{reason}). Clients and the HTTP API use
    TLS and check the node's certificate against the cluster CA.""",
    """Every node checks access tokens, also one that joined with a join token (it learns them by
    gossip). Before a connection has said who it is, its frames are at most 64 KiB, it has 5 s for
    its hello, and at most 64 such connections wait (the oldest is closed for a new one). A TLS
    stream cut without close_notify is reported as truncated. Only the first node (or those
    cluster up --issuers names) holds the CA key and admits machines joining with a token.""",
    """Everything a cluster writes is its owner's only: directories 0700; keys, certificates, the
    cluster file, logs, WAL segments, SSTables and manifests 0600. An encrypting node seals its
    MANIFEST (an HMAC under the data key, with a generation): one changed, rolled back or naming
    planted plain files is refused.""",
    """The web view (bhandar web) listens on loopback only, answers only requests addressed to it
    there, and runs only commands carrying the key it wrote into its page.""",
    """cluster up --insecure runs plain TCP without token checks (node run --admit-anyone). A node
    without --tls-dir, or with --admit-anyone, refuses to listen on any address that is not
    loopback (exit 2). For a cluster grown by hand: cluster init makes the CA,
    cluster cert NODE --host H --out DIR issues a node's certificate, node run --tls-dir DIR uses
    it. See docs/security.md in the source tree; look at a certificate with
    openssl x509 -in DATA_DIR/tls/node.crt -noout -subject.""",
]

EXIT_STATUS = [
    ("0", "Success."),
    (
        "1",
        "The operation failed: unavailable, timed out, refused by the store (too many siblings), or "
        "refused to the token (unauthenticated, forbidden, rate_limited). An unavailable write was "
        "not applied anywhere (get, put, delete and incr take a request a node refused unrun, or "
        "could not be reached for, to the key's next live node first: up to three are asked); a "
        "timed-out one may have been, and is not sent again (run an incr again with the request id "
        "its error names and it counts once).",
    ),
    (
        "2",
        "Usage error: an unknown command or option, a bad option value, a keyspace nobody created, "
        "or input past a limit (error code bad_input or too_large; see LIMITS). The error is one "
        "line on standard error, with the command's usage when the command line itself is wrong.",
    ),
    ("3", "Key not found (get)."),
]


LIMITS = [
    """Every input limit is checked by the command line, the REPL and the HTTP API before anything
    is sent, and again by the node, so a limit cannot be bypassed; a request past one is an error
    with code bad_input (too_large for sizes): exit 2, HTTP 400 (413), one line in the REPL. Nothing
    is stored.""",
    f"""Keys: 1 to {limits.MAX_KEY_BYTES} bytes of UTF-8. Values: at most {limits.MAX_VALUE_BYTES}
    bytes. JSON values: nested at most {limits.MAX_JSON_DEPTH} levels of arrays and objects; NaN,
    Infinity and numbers beyond a double's range are not JSON and are refused (quote them to store
    a string). In the HTTP API a key or keyspace is percent-decoded strictly: an escape that is not
    UTF-8 (%FF) is a 400, never a replacement character.""",
    f"""Counters: a delta, and the value an increment leads to, stay within ±{limits.MAX_INTEGER}
    (2^53-1, the integers every JSON client, JavaScript included, represents exactly); an increment
    that would leave that range is refused unless it moves the value back towards zero. The check
    uses the coordinator's view, so increments through different coordinators at the same moment
    can together pass it; get then shows the exact value. Request ids: 1 to
    {limits.MAX_REQUEST_ID_CHARS} characters.""",
    f"""Contexts: a context string of at most {limits.MAX_CONTEXT_CHARS} characters naming at most
    {limits.MAX_CONTEXT_ACTORS} actors, each counter within 1..2^53-1. A context claiming a counter
    of the coordinator's own actor that it never issued for the key is refused as a context from
    the future. A forged claim about another node's actor, which the coordinator cannot disprove,
    leaves the key writable: a node whose next counter for a key would pass 2^53-1 continues under
    a new actor id (A~N).""",
]

DELETE = [
    """A delete writes a tombstone that replaces the versions its context covers. Without a context
    (the default: --context auto on the command line, ctx=auto in the REPL) it uses the context of
    the session's last get of the key (REPL) or reads the key first and deletes what the read
    found, and says what it removed ("deleted 2 siblings: ..."; -o json adds "removed" and
    "blind"). --context none (ctx=none) is a blind tombstone: it covers no version, so in a siblings
    keyspace every value already stored survives it; a warning says so.""",
    """The HTTP API does the same: DELETE /v1/kv/KS/KEY without a context reads the key, deletes what
    it found and answers 204 with the header X-Bhandar-Deleted (the number of values removed);
    ?context=CONTEXT deletes what that get saw (204); ?context=none writes the blind tombstone and
    answers 200 with {"blind": true, "warning": "..."}.""",
]


# A process cluster's directory (cluster up --dir DIR; every file 0600, every directory 0700), and
# the Prometheus rules of the source tree.
FILES = [
    (
        "DIR/cluster.json",
        """The cluster file: nodes, zones, addresses, ports, pids, data directories and the admin
        token cluster up made. The one-shot commands and --connect read it.""",
    ),
    ("DIR/auth.json", "The access token table as cluster up seeded it (token hashes, grants, rates)."),
    (
        "DIR/tls/ca.crt, DIR/tls/ca.key",
        "The cluster CA (cluster up, or cluster init). Keep ca.key private: it can issue node certificates.",
    ),
    (
        "DIR/keys/data.key",
        """The data key (256 bits, base64; cluster up unless --no-encrypt, or cluster init): every
        node's WAL and SSTables are encrypted with it (AES-256-GCM). Whoever holds it can read the
        data; losing it loses the data; it cannot be rotated. It protects a stolen disk, not a
        compromised host.""",
    ),
    ("DIR/NODE.log", "One log per node: start, stop, peers up and down, refusals, corruption found."),
    (
        "DIR/data/NODE/",
        """A node's data directory: MANIFEST (the live tables), NNNNNN.log (write-ahead log),
        NNNNNN.sst (tables), quarantine/ (tables that failed a checksum), KEYCHECK (the id of the
        data key an encrypted directory needs), join-tokens.json, and
        tls/ (node.key, node.crt, ca.crt: the node's identity, which a restore keeps).""",
    ),
    ("DIR/snapshots/NAME/", "A snapshot: hard links to every node's tables at the time it was taken."),
    (
        "ops/prometheus/bhandar-rules.yml",
        """In the source tree: Prometheus recording rules for the SLO (99.9% of requests succeed
        over 30 days), its error budget and burn rate, and alerts on hint age and repair age, for
        the series each node serves at GET /metrics.""",
    ),
]


def fixed_sections() -> dict[str, list[str]]:
    description = [line for p in DESCRIPTION for line in para(p)]
    repl = repl_section()
    json_out = para(
        """With -o json every command prints one JSON object on one line. The fields below are
        stable; more may be added. K and S are strings, N integers, F numbers, V a value (JSON, or
        {"base64": "..."} for other bytes); context is an opaque context string to pass back to put
        and delete."""
    )
    json_out += example(JSON_SHAPES.replace("CODES", "|".join(ERROR_CODES)))
    json_out += para(
        """The sim commands give the same figures as their tables, unrounded (the tables round
        them); CLOCK is an object from node to counter."""
    )
    json_out += example(JSON_SIM_SHAPES)
    json_out += para(
        """chaos --swarm prints one object when its seeds have finished (or at Ctrl-C): each failed
        seed with its first violation, how many the checker found and the command that replays it;
        options left to be drawn per seed are null."""
    )
    json_out += example(JSON_CHAOS_SWARM_SHAPE)
    json_out += para(
        """check prints one object per run: the verdict, each problem with the indexes of the
        operations it names (their lines in the history.jsonl of the log directory), and the
        command line that repeats the run."""
    )
    json_out += example(JSON_CHECK_SHAPE)
    http = para(HTTP_TEXT) + example(HTTP_ENDPOINTS)
    exit_status = [line for code, text in EXIT_STATUS for line in item(bold(code), text)]
    exit_status += para("Errors are written to standard error, whatever the output mode.")
    exit_status += para("A script that bhandar repl runs in batch mode exits as SCRIPTS says.")
    exit_status += para(
        """bhandar check exits 0 when the history is valid, 1 when it is invalid or the checker
        cannot decide (unknown), and 2 on a usage, setup or protocol error (no such program, no
        init_ok, a malformed message, a flood)."""
    )
    environment = item(
        bold("BHANDAR_CLUSTER"),
        """The cluster directory used by the one-shot data commands (get, put, delete, incr), the
        keyspace commands and the cluster commands when --cluster is not given; the default is
        ./.bhandar.""",
    )
    environment += item(
        bold("BHANDAR_TOKEN"),
        """The token the command line shows the cluster; the default is the one in the cluster
        file (the admin token cluster up made). Roles: read (get), write (put, delete, incr),
        admin on * (keyspace create, partition, heal, delay, shutdown, snapshot, cluster token
        create|list|revoke); views need any valid token.""",
    )
    environment += item(
        bold("BHANDAR_DATA_KEY"),
        """The data key (base64 of 32 bytes) for bhandar node run when --data-key-file is not
        given: the node encrypts its WAL and SSTables at rest with it. A node whose data directory
        is encrypted refuses to start without its key, or with another one.""",
    )
    environment += item(
        bold("BHANDAR_CHECK_DIR"),
        """Set by bhandar check for each node program it starts: a directory of that node slot's
        own, kept across the node's restarts, where a node may keep what must survive a kill.
        bhandar node maelstrom keeps its store there when --data-dir is not given.""",
    )
    files: list[str] = []
    for path, text in FILES:
        files += item(bold(path), text)
    see_also = para(
        """README.md and the guides in docs/ of the source tree (docs/README.md lists them: one per
        concept, each with the REPL commands and demo that show it; docs/http-api.md,
        docs/security.md, docs/tokens.md, docs/performance.md); prometheus(1), curl(1), jq(1);
        G. DeCandia et al., Dynamo: Amazon's Highly Available Key-value Store, SOSP 2007."""
    )
    return {
        "DESCRIPTION": description,
        "REPL COMMANDS": repl,
        "SCRIPTS": scripts_section(),
        "LIMITS": [line for p in LIMITS for line in para(p)],
        "DELETE": [line for p in DELETE for line in para(p)],
        "JSON OUTPUT": json_out,
        "HTTP API": http,
        "SECURITY": [line for p in SECURITY for line in para(p)],
        "EXIT STATUS": exit_status,
        "ENVIRONMENT": environment,
        "FILES": files,
        "SEE ALSO": see_also,
    }


# --- the page -----------------------------------------------------------------------------------


def render_man() -> str:
    tree = command_tree()
    root_cmd, _ = tree[0]
    summary = (clean_help(root_cmd.help) or [PROG])[0]
    # "Bhandar: a Dynamo-style ..." -> "a Dynamo-style ..." for the NAME line's "bhandar - ...".
    name_line = summary.split(": ", 1)[1] if summary.lower().startswith(PROG + ":") else summary
    fixed = fixed_sections()
    lines = [
        '.\\" Generated by scripts/gen_man.py from the typer app; do not edit by hand.',
        f'.TH BHANDAR 1 "" {arg(f"{PROG} {__version__}")} "Bhandar Manual"',
        # No hyphenation: option names and field names must not be split across lines.
        ".nh",
        ".SH NAME",
        f"{PROG} \\- {esc(name_line.rstrip('.'))}",
        ".SH SYNOPSIS",
    ]
    leaves = [(c, ctx) for c, ctx in tree if not hasattr(c, "list_commands")]
    lines += [f"{bold(root_cmd.name or PROG)} {esc(_usage(root_cmd, tree[0][1]))}"]
    for cmd, ctx in leaves:
        lines += [".br", f"{bold(ctx.command_path)} {esc(_usage(cmd, ctx))}"]
    lines += [".SH DESCRIPTION", *fixed["DESCRIPTION"], ".SH COMMANDS"]
    for cmd, ctx in tree:
        lines += command_section(cmd, ctx)
    for title in (
        "REPL COMMANDS",
        "SCRIPTS",
        "LIMITS",
        "DELETE",
        "JSON OUTPUT",
        "HTTP API",
        "SECURITY",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SEE ALSO",
    ):
        lines += [f".SH {arg(title)}", *fixed[title]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate man/bhandar.1 from the typer app.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page is stale")
    args = parser.parse_args(argv)
    page = render_man()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != page:
            print(f"{PAGE} is stale; run: python scripts/gen_man.py", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
