"""`bhandar web` as a subprocess and a real headless Chromium (Debian's chromium and chromium-driver)
driven by selenium.

Nothing is downloaded at test time: selenium is handed /usr/bin/chromedriver. Without it the tests
fail with the line that installs it; they are never skipped. Every process a test starts is
stopped by its fixture, also when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.web.layout import POLL_S

REPO = Path(__file__).resolve().parents[2]
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get install -y chromium chromium-driver"


@dataclass
class WebProcess:
    """A running `bhandar web`: its page's address and its standard input (the REPL session)."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def type_line(self, line: str) -> None:
        """Run a command in the serving session, as typed on its standard input."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def command(self, line: str) -> list[dict[str, Any]]:
        """Run a command through the page's command endpoint, with the key its page holds, as the
        page does; its replies."""
        request = urllib.request.Request(
            self.url + "api/command",
            data=json.dumps({"line": line}).encode(),
            headers={"Content-Type": "application/json", "X-Bhandar-Key": page_key(self.url)},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return list(json.loads(response.read())["replies"])

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@dataclass
class DemoProcess:
    """A running `bhandar demo NAME --web`: its page's address, its process and its output."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def enter(self, times: int = 1) -> None:
        """Press Enter `times` times, as a class does between steps."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"\n" * times)
        self.proc.stdin.flush()


@contextlib.contextmanager
def demo_process(tmp_path: Path, name: str, *options: str) -> Iterator[DemoProcess]:
    """`bhandar demo NAME --web` (Enter per step, as a class; `--auto` in `options`: on its own),
    stopped at the end. Its standard input stays open: after the last step the page stays until
    Enter."""
    log = tmp_path / "demo.out"
    env = {k: v for k, v in os.environ.items() if k != "BHANDAR_CLUSTER"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "bhandar_cli", "demo", name, "--web", *options, "--port", "0"],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=env,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"web view at (http://\S+/)", log.read_text(errors="replace"))):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield DemoProcess(proc, found.group(1), log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stdin is not None:
            proc.stdin.close()


def page_key(url: str) -> str:
    """The key the server wrote into its page (what the page's script sends with a command)."""
    with urllib.request.urlopen(url, timeout=30) as response:
        html = response.read().decode()
    found = re.search(r'<meta name="bhandar-key" content="([^"]+)">', html)
    assert found, "the page holds no key"
    return found.group(1)


def start_web(tmp_path: Path, *args: str) -> Iterator[WebProcess]:
    log = tmp_path / "web.out"
    env = {k: v for k, v in os.environ.items() if k != "BHANDAR_CLUSTER"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "bhandar_cli", "web", "--port", "0", *args],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=env,
        )
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None:
            found = re.search(r"web view at (http://\S+/)", log.read_text(encoding="utf-8", errors="replace"))
            if found:
                url = found.group(1)
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"bhandar web did not start:\n{log.read_text()}")
            else:
                time.sleep(0.05)
        yield WebProcess(proc, url, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    """`bhandar web` on a 5-node in-process cluster."""
    yield from start_web(tmp_path, "--nodes", "5")


def until(driver: Any, condition: Callable[[Any], Any], timeout: float = 20, poll: float = POLL_S) -> Any:
    """Wait (bounded) until `condition(driver)` holds. The page re-makes what changed (a node card
    every heartbeat): an element found in one call may be gone by the next, so conditions find
    what they read themselves, and a reference gone stale in the middle of one is a retry."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        driver, timeout, poll_frequency=poll, ignored_exceptions=(StaleElementReferenceException,)
    )
    return wait.until(condition)


def click(driver: Any, selector: str, timeout: float = 20) -> None:
    """Click the element the CSS selector finds, found afresh inside the wait (see `until`)."""
    from selenium.webdriver.common.by import By

    def clicked(d: Any) -> bool:
        d.find_element(By.CSS_SELECTOR, selector).click()
        return True

    until(driver, clicked, timeout)


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium at 1280x720, the projector's size."""
    if not os.path.exists(CHROMEDRIVER):
        pytest.fail(f"{CHROMEDRIVER} is missing: the web view's tests need `{INSTALL}`", pytrace=False)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[test]'", pytrace=False)
    options = webdriver.ChromeOptions()
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,720",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_window_size(1280, 720)
        # Make the page itself 1280x720, whatever the window's own frame takes.
        inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
        driver.set_window_size(1280 + 1280 - inner[0], 720 + 720 - inner[1])
        yield driver
    finally:
        driver.quit()
