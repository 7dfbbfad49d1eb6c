"""Checks of the live page's layout, made on the rendered DOM of a real browser: at a window size and
text size, the page and its panels do not scroll, no text leaves the box that shows it, no two
labels of the ring or of the sequence diagram overlap (bounding boxes), and the header's counts
are the cluster's."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.support.ui import WebDriverWait

SIZES = ((1280, 720), (1920, 1080))
WAIT_S = 30
# How often a wait looks again: a look is one script call (a few ms), and a wait that looked
# twice a second lost half a second a time, at every size of every step (minutes a run).
POLL_S = 0.05

# Returns a list of problems, each a sentence naming the element and the numbers.
CHECK = r"""
const problems = [];
const tag = (e) => e.tagName.toLowerCase();
const name = (e) => (e.id ? `#${e.id}` : e.getAttribute("class")
  ? `${tag(e)}.${e.getAttribute("class").split(" ")[0]}` : tag(e))
  + (e.closest("[id]") && !e.id ? ` in #${e.closest("[id]").id}` : "");
const doc = document.documentElement;
if (doc.scrollHeight > innerHeight + 1 || doc.scrollWidth > innerWidth + 1)
  problems.push(`the page is ${doc.scrollWidth}x${doc.scrollHeight} in ${innerWidth}x${innerHeight}`);
const visible = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
// No panel scrolls, nor any box in one; and none hides what overflows it. Except a box made to
// scroll (class "scrolls": a long narration, a newest reply taller than the log), whose content
// counts as inside it.
for (const e of document.querySelectorAll("header, .panel, .panel *")) {
  if (e.closest("svg") || !visible(e) || ["INPUT", "BUTTON"].includes(e.tagName)) continue;
  if (e.closest(".scrolls")) continue;
  if (e.scrollHeight > e.clientHeight + 1 && e.clientHeight > 0)
    problems.push(`${name(e)} holds ${e.scrollHeight}px of content in ${e.clientHeight}px`);
  if (e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0)
    problems.push(`${name(e)} holds ${e.scrollWidth}px wide content in ${e.clientWidth}px`);
}
// Every piece of text lies inside each box around it that clips, and inside the window.
const inside = (r, b) => r.left >= b.left - 1 && r.right <= b.right + 1
  && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let t = walker.nextNode(); t; t = walker.nextNode()) {
  const host = t.parentElement;
  if (!t.textContent.trim() || !host || !visible(host)) continue;
  if (host.closest("[hidden], title, script, style, .scrolls")) continue;
  const range = document.createRange();
  range.selectNodeContents(t);
  const boxes = [{ left: 0, top: 0, right: innerWidth, bottom: innerHeight, what: "the window" }];
  for (let a = host; a && a !== document.body; a = a.parentElement) {
    const cs = getComputedStyle(a);
    if (cs.overflow !== "visible" || a.tagName === "svg") {
      const r = a.getBoundingClientRect();
      boxes.push({ left: r.left, top: r.top, right: r.right, bottom: r.bottom, what: name(a) });
    }
  }
  for (const r of range.getClientRects()) {
    for (const b of boxes) {
      if (r.width && !inside(r, b)) {
        problems.push(`"${t.textContent.trim().slice(0, 40)}" leaves ${b.what}`);
        break;
      }
    }
  }
}
// No two labels of a diagram overlap.
for (const id of ["ring", "sequence"]) {
  const texts = [...document.querySelectorAll(`#${id} text`)].map((e) => [e, e.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0);
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      const [a, ra] = texts[i], [b, rb] = texts[j];
      if (a.contains(b) || b.contains(a)) continue;
      const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (w > 0.5 && h > 0.5) problems.push(`#${id}: "${a.textContent}" overlaps "${b.textContent}"`);
    }
  }
}
return problems;
"""


def resize(driver: Any, width: int, height: int) -> None:
    """Make the page itself width x height, whatever the window's own frame takes."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])


def show(driver: Any, width: int, height: int, large: bool) -> None:
    """Resize and set the text size, then wait until the page has been fitted to both."""
    resize(driver, width, height)
    driver.execute_script("setLarge(arguments[0])", large)
    fitted = f"{width}x{height}" + (" large" if large else "")
    # Read after two animation frames: a refit the browser still owes (a box that changed size
    # in the last layout) has then begun, and the mark says so.
    after_frames = (
        "const done = arguments[0];"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(document.body.dataset.fitted)))"
    )
    WebDriverWait(driver, WAIT_S, poll_frequency=POLL_S).until(
        lambda d: d.execute_async_script(after_frames) == fitted
    )


def layout_problems(driver: Any) -> list[str]:
    return list(driver.execute_script(CHECK))


def header_counts(driver: Any) -> tuple[int, int, str]:
    """The header's node count, running count and line."""
    nodes, running, line = driver.execute_script(
        "const s = document.getElementById('summary');"
        "return [s.dataset.nodes, s.dataset.running, s.textContent]"
    )
    return int(nodes), int(running), str(line)


RING_MIN_PX = 200  # below this (issue 41: ~150 px) the replica markers 1 2 3 touch
WIDE = 240  # columns wide enough for any table the log shows: each cell whole


def ring_px(driver: Any) -> float:
    """The ring as drawn: the smaller side of the box around its arcs, in px of the screen."""
    return float(
        driver.execute_script(
            "const rs = [...document.querySelectorAll('#ring path')].map((p) => p.getBoundingClientRect());"
            "if (!rs.length) return 0;"
            "const w = Math.max(...rs.map((r) => r.right)) - Math.min(...rs.map((r) => r.left));"
            "const h = Math.max(...rs.map((r) => r.bottom)) - Math.min(...rs.map((r) => r.top));"
            "return Math.min(w, h);"
        )
    )


# Every line of the log as [is a command line, its text, whether it lies inside the log's box and
# the window], and whether the box has to be scrolled to show all it holds.
LOG_LINES = r"""
const out = document.getElementById("output"), box = out.getBoundingClientRect();
return {scrolls: out.scrollHeight > out.clientHeight + 1, lines: [...out.children].map((e) => {
  const r = e.getBoundingClientRect();
  const inside = r.top >= box.top - 1 && r.bottom <= box.bottom + 1 && r.bottom <= innerHeight + 1;
  return [e.classList.contains("line"), e.textContent, inside];
})};
"""


def newest_hidden(driver: Any, url: str) -> list[str]:
    """The lines of the session's newest command and reply (as the server printed them for this
    page) that the page's log does not show whole and in view, without scrolling (none is the
    goal). Found by their text, wherever the page puts the newest."""
    import json
    import urllib.error
    import urllib.request

    columns = driver.execute_script("return document.getElementById('output').dataset.laidOut")
    try:  # the log as printed for this page; a page that asks for none shows the snapshot's
        with urllib.request.urlopen(f"{url}api/log?columns={columns}", timeout=30) as response:
            log = json.loads(response.read())["log"]
    except urllib.error.HTTPError:
        with urllib.request.urlopen(f"{url}api/state", timeout=30) as response:
            log = json.loads(response.read())["log"]
    if not log:
        return []
    expected = [f"> {log[0]['line']}", *(line or " " for line in log[0]["text"].split("\n"))]
    shown = driver.execute_script(LOG_LINES)
    lines = shown["lines"]
    for i, (is_command, text, _) in enumerate(lines):
        if is_command and text == expected[0]:
            block = lines[i : i + len(expected)]
            if [t for _, t, _ in block] == expected:
                hidden = [t for _, t, inside in block if not inside]
                if shown["scrolls"]:
                    hidden.append("(the log box scrolls to show the newest reply)")
                return hidden
    found = [t for is_command, t, _ in lines if is_command]
    return [
        f"(the newest command {expected[0]!r} and its {len(expected) - 1} lines are not all shown; "
        f"the log shows {found})"
    ]


def log_cut_where_room(driver: Any, url: str) -> list[str]:
    """Problems of the log's tables: laid out at another width than the page measured, a line
    the box wraps though it is no wider than the box, or a cell cut ("…") in a reply whose whole
    table fits the box. The page's text is checked against the server's print at the measured
    width and at WIDE columns (GET /api/log)."""
    import json
    import urllib.request

    columns, laid_out, rows = driver.execute_script(
        "const o = document.getElementById('output');"
        "const lh = parseFloat(getComputedStyle(o).fontSize) * 1.6;"
        "return [Number(o.dataset.columns), Number(o.dataset.laidOut), [...o.querySelectorAll('.ok, .err')]"
        " .map((e) => [e.textContent, e.getBoundingClientRect().height > lh])]"
    )
    problems = []
    if not columns or columns != laid_out:
        problems.append(f"the log box measures {columns} columns, its tables are laid out at {laid_out}")
        return problems
    for text, wrapped in rows:
        if wrapped and len(text) <= columns:
            problems.append(
                f"a line of {len(text)} characters wraps in {columns} columns: {text.strip()[:40]!r}"
            )

    def printed(width: int) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{url}api/log?columns={width}", timeout=30) as response:
            return list(json.loads(response.read())["log"])

    for narrow, wide in zip(printed(columns), printed(WIDE), strict=True):
        natural = max((len(line.rstrip()) for line in wide["text"].splitlines()), default=0)
        if natural <= columns and narrow["text"].count("…") > wide["text"].count("…"):
            problems.append(f"> {narrow['line']}: a cell cut in {columns} columns, {natural} needed")
    return problems
