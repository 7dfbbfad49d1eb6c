"""Checks of the live page's layout, made on the rendered DOM of a real browser: at a window size and
text size, the page and its panels do not scroll, no text leaves the box that shows it, no two
labels of the ring or of the sequence diagram overlap (bounding boxes), and the header's counts
are the cluster's."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.support.ui import WebDriverWait

SIZES = ((1280, 720), (1920, 1080))
WAIT_S = 30

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
// No panel scrolls, nor any box in one; and none hides what overflows it.
for (const e of document.querySelectorAll("header, .panel, .panel *")) {
  if (e.closest("svg") || !visible(e) || ["INPUT", "BUTTON"].includes(e.tagName)) continue;
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
  if (host.closest("[hidden], title, script, style")) continue;
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
    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_async_script(after_frames) == fitted)


def layout_problems(driver: Any) -> list[str]:
    return list(driver.execute_script(CHECK))


def header_counts(driver: Any) -> tuple[int, int, str]:
    """The header's node count, running count and line."""
    nodes, running, line = driver.execute_script(
        "const s = document.getElementById('summary');"
        "return [s.dataset.nodes, s.dataset.running, s.textContent]"
    )
    return int(nodes), int(running), str(line)
