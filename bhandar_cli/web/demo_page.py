"""`bhandar demo NAME --web`: the web view served beside a classroom demo, its narration on the page.

The page is the one the REPL's `web` command serves (background.py), started on the demo's session
before the first step; the demo's Narration (teach/narration.py) feeds the snapshot's `demo`
field, which the page draws in its Narration panel. When the demo has run to its end (every step,
or a failed expectation) the page stays up until Enter or Ctrl-C, so the class can look at the
final state and the last ✓ or ✗; at the end of input (a script, stdin from /dev/null) it stops at
once. A demo stopped with q or Ctrl-C stops the page too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio
from rich.console import Console
from rich.text import Text

from bhandar_cli.repl import Session
from bhandar_cli.teach import EndAware, Narration
from bhandar_cli.web.background import serve_in_background, stop_serving


@dataclass(frozen=True)
class WebPage:
    """Where `bhandar demo --web` serves the page: the port (0: any free one), and whether to open
    it in the default browser. The demo runner is handed it (teach/demo_runner.py's `DemoPage`)."""

    port: int
    open_browser: bool = False

    @asynccontextmanager
    async def serving(
        self, session: Session, narration: Narration, out: Console, reader: EndAware
    ) -> AsyncIterator[None]:
        """Serve the page while the demo plays; afterwards wait as the module says, then stop it."""
        answer = await serve_in_background(session, self.port)  # BadInput when the port is taken
        server = session.web
        assert server is not None  # serve_in_background has just set it
        server.state.set_demo(dict(narration.view))
        narration.listeners.append(server.state.set_demo)
        url = answer["url"]
        out.print(Text(f"web view at {url} (the demo's narration is on the page)", style="bold"))
        out.file.flush()
        if self.open_browser:
            import webbrowser

            await trio.to_thread.run_sync(webbrowser.open, url)
        try:
            yield
            if narration.view["state"] in ("done", "failed") and not reader.ended:
                out.print(Text(f"the page stays at {url}: Enter (or Ctrl-C) stops it", style="dim"))
                out.file.flush()
                try:
                    await trio.to_thread.run_sync(reader, abandon_on_cancel=True)
                    await trio.lowlevel.checkpoint()  # a Ctrl-C that woke the reading thread lands here
                except KeyboardInterrupt:
                    pass
        finally:
            with trio.CancelScope(shield=True):
                await stop_serving(session)
