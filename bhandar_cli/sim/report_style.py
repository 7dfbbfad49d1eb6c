"""How the HTML page of a run looks, for every such page (`bhandar chaos --report`, `bhandar check
--report`): the style sheet, and the colour of each kind of fault, so a fault reads the same on
both."""

from __future__ import annotations

FAULT_COLOURS = {
    "kill": "#e15759", "restart": "#ff9da7", "partition": "#f28e2b", "clog": "#edc948",
    "delay": "#76b7b2", "loss": "#b07aa1", "duplicate": "#9c755f", "join": "#59a14f",
    "decommission": "#4e79a7",
}  # fmt: skip
STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 1rem; color: #111; background: #fff; }
.verdict { font-size: 1.3rem; font-weight: bold; }
.failed { color: #b00020; } .passed { color: #1b7f3b; }
.replay { background: #fff3cd; border: 2px solid #b00020; padding: 0.5rem; margin: 0.5rem 0; }
.replay code { font-size: 1.05rem; user-select: all; }
ol.violations { font-family: monospace; font-size: 0.9rem; }
pre { background: #f6f8fa; padding: 0.5rem; overflow: auto; }
svg text { font-size: 11px; }
.legend span { margin-right: 1rem; }
.box { display: inline-block; width: 0.8rem; height: 0.8rem; vertical-align: middle; margin-right: 0.2rem; }
"""
