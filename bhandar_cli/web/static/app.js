// Bhandar live view: draws the server's state snapshots (Server-Sent Events from /api/events).
// Drawing only: every number comes from the snapshot; commands go to /api/command, which runs them
// in the serving REPL session. Text is always set with textContent, never parsed as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7",
                 "#9c755f", "#e15759", "#bab0ac"];
const STATE_MARK = { up: "● UP", suspected: "▲ SUSPECTED", down: "✖ DOWN" };
let state = null;
let shownRequest = 0;

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function colour(name) {
  const names = state ? state.nodes.map((n) => n.id) : [];
  const i = names.indexOf(name);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
}

// --- nodes and partition groups -------------------------------------------------------------
function drawNodes(s) {
  const box = document.getElementById("groups");
  const split = s.partitions.length > 1;
  const groups = split ? s.partitions : [s.nodes.map((n) => n.id)];
  const layout = JSON.stringify(groups);
  if (box.dataset.layout !== layout) {  // a new partition: new regions (cards are re-made below)
    box.replaceChildren();
    box.dataset.layout = layout;
    groups.forEach((members, i) => {
      const region = el("div", { class: split ? "group split" : "group", "data-group": String(i + 1),
                                 "data-members": members.join(",") });
      region.append(el("div", { class: "label", title: "a partition: no message crosses between groups" }, split
        ? `group ${i + 1}: ${members.join(", ")}`
        : "one network: every node reaches every other"));
      region.append(el("div", { class: "cards" }));
      box.append(region);
    });
  }
  // Only a card whose content changed is re-made, so a button is not replaced under the pointer.
  const rows = box.querySelectorAll(".cards");
  const cards = new Map(s.nodes.map((n) => [n.id, n]));
  groups.forEach((members, i) => {
    const row = rows[i];
    members.filter((name) => cards.has(name)).forEach((name, k) => {
      const n = cards.get(name), sig = JSON.stringify(n);
      const old = row.children[k];
      if (old && old.id === `node-${name}` && old.dataset.sig === sig) return;
      const made = card(n);
      made.dataset.sig = sig;
      if (old) old.replaceWith(made); else row.append(made);
    });
  });
  const up = s.nodes.filter((n) => n.state === "up").length;
  document.getElementById("summary").textContent =
    `${s.nodes.length} nodes: ${up} up, ${s.nodes.length - up} down or suspected` +
    (split ? ` · partitioned in ${s.partitions.length} groups` : "");
  document.getElementById("consistency").textContent = `consistency ${s.consistency}`;
  document.getElementById("tracing").textContent = s.trace ? "trace on" : "trace off (type: trace on)";
}

function card(n) {
  const c = el("div", { class: "card", id: `node-${n.id}`, "data-state": n.state, title: `${n.code} ${n.status}` });
  const head = el("div", { class: "name" });
  head.append(el("span", { class: "swatch", style: `background:${colour(n.id)}` }), n.id);
  if (n.status !== "normal") head.append(el("span", { class: "hint" }, n.status));
  c.append(head, el("div", { class: "state" }, STATE_MARK[n.state] || n.state));
  const dl = el("dl");
  const held = Object.entries(n.hints_for).map(([t, k]) => `${k}→${t}`).join(" ");
  // A peer cut off for long has a phi in the millions (the odds it is still up: 1 in 10^phi):
  // past 1000 the number says nothing more than "certainly down" does, and no longer fits a card.
  const phi = n.state === "down" ? "—" : n.phi >= 1000 ? "∞" : n.phi.toFixed(1);
  const rows = [["phi", phi], ["zone", n.zone]];
  if (n.group !== null) rows.push(["group", String(n.group)]);
  rows.push(["keys", String(n.keys)], ["hints", held ? `${n.hints} (${held})` : String(n.hints)]);
  if (n.suspected_by.length) rows.push(["down to", n.suspected_by.join(",")]);
  for (const [k, v] of rows) { dl.append(el("dt", {}, k), el("dd", { "data-field": k }, v)); }
  c.append(dl);
  const buttons = el("div", { class: "buttons" });
  const kill = el("button", { type: "button", "data-action": "kill", "aria-label": `kill ${n.id}` }, "kill");
  const revive = el("button", { type: "button", "data-action": "revive", "aria-label": `revive ${n.id}` }, "revive");
  kill.disabled = n.state === "down";
  revive.disabled = n.state !== "down";
  kill.onclick = () => run(`kill ${n.id}`);
  revive.onclick = () => run(`revive ${n.id}`);
  buttons.append(kill, revive);
  c.append(buttons);
  return c;
}

// --- the ring ---------------------------------------------------------------------------------
function polar(token, r, space) {
  const a = (token / space) * 2 * Math.PI - Math.PI / 2;
  return [r * Math.cos(a), r * Math.sin(a)];
}
function arcPath(lo, hi, r0, r1, space) {
  const span = ((hi - lo + space) % space) || space;
  const end = lo + span;
  const large = span / space > 0.5 ? 1 : 0;
  const [x0, y0] = polar(lo, r1, space), [x1, y1] = polar(end, r1, space);
  const [x2, y2] = polar(end, r0, space), [x3, y3] = polar(lo, r0, space);
  return `M${x0},${y0} A${r1},${r1} 0 ${large} 1 ${x1},${y1} L${x2},${y2} ` +
         `A${r0},${r0} 0 ${large} 0 ${x3},${y3} Z`;
}
function drawRing(s) {
  const ring = document.getElementById("ring");
  ring.replaceChildren();
  const { arcs, space } = s.ring;
  const zones = [...new Set(Object.values(s.ring.zones))].sort();
  const focus = s.focus;
  const marks = new Map(); // arc index -> replica number (1 = first of the preference list)
  if (focus && focus.token !== null && arcs.length) {
    const sorted = arcs.map((a, i) => [a, i]).sort((x, y) => x[0].hi - y[0].hi);
    let start = sorted.findIndex(([a]) => a.hi >= focus.token);
    if (start < 0) start = 0;
    focus.replicas.forEach((name, r) => {
      for (let k = 0; k < sorted.length; k++) {
        const [a, i] = sorted[(start + k) % sorted.length];
        if (a.owner === name) { marks.set(i, r + 1); break; }
      }
    });
  }
  arcs.forEach((a, i) => {
    const path = svg("path", { d: arcPath(a.lo, a.hi, 95, 135, space), fill: colour(a.owner),
                               stroke: "#101418", "stroke-width": 1, "data-owner": a.owner });
    if (marks.has(i)) path.classList.add("pref");
    path.append(svg("title", {}, `${a.owner} (${a.zone}): (${a.lo}, ${a.hi}]`));
    ring.append(path);
    const zi = zones.indexOf(a.zone);
    ring.append(svg("path", { d: arcPath(a.lo, a.hi, 138, 148, space),
      fill: ["#6e7681", "#30363d", "#c9d1d9", "#484f58"][zi % 4], stroke: "#101418" }));
    const span = ((a.hi - a.lo + space) % space) || space;
    const mid = a.lo + span / 2;
    if (span / space > 0.025) {
      const [x, y] = polar(mid, 115, space);
      ring.append(svg("text", { x, y, "font-weight": "bold" }, a.owner));
      if (span / space > 0.04) {
        const [zx, zy] = polar(mid, 155, space);
        ring.append(svg("text", { x: zx, y: zy, class: "zone-label" }, a.zone));
      }
    }
    if (marks.has(i)) {
      const [x, y] = polar(mid, 84 - (marks.get(i) - 1) * 17, space);  // staggered: replicas often sit side by side
      ring.append(svg("circle", { cx: x, cy: y, r: 8, fill: "#fff" }));
      ring.append(svg("text", { x, y, fill: "#000", style: "fill:#000", "data-replica": a.owner },
                      String(marks.get(i))));
    }
  });
  if (focus && focus.token !== null) {
    const [x, y] = polar(focus.token, 150, space);
    ring.append(svg("line", { x1: 0, y1: 0, x2: x, y2: y, stroke: "#fff", "stroke-dasharray": "3 2" }));
    ring.append(svg("text", { x: 0, y: 0 }, `${focus.keyspace}/${focus.key}`));
  }
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  for (const n of s.nodes) {
    const item = el("span");
    item.append(el("span", { class: "swatch", style: `display:inline-block;width:0.8rem;height:0.8rem;background:${colour(n.id)}` }),
                ` ${n.id} ${n.zone} ${(100 * (s.ring.ownership[n.id] || 0)).toFixed(1)}%`);
    legend.append(item);
  }
}

// --- the focused key: replicas, siblings with dots and clocks ---------------------------------
function drawKey(s) {
  const box = document.getElementById("key");
  box.replaceChildren();
  const f = s.focus;
  if (!f) { box.append(el("p", { class: "hint" }, "Run a put or get, or type a key above.")); return; }
  box.append(el("div", {}, `${f.keyspace}/${f.key} · token ${f.token} · replicas ${f.replicas.join(", ")}` +
    (f.fallbacks.length ? ` · fallbacks ${f.fallbacks.join(", ")}` : "")));
  for (const [node, versions] of Object.entries(f.holders)) {
    const holder = el("div", { class: "holder", "data-holder": node });
    const role = f.down.includes(node) ? "down, not asked" : (f.replicas.includes(node) ? "replica" : "holds a hint");
    holder.append(el("b", {}, `${node}`), ` (${role}): ${versions.length} version(s)`);
    for (const v of versions) {
      if (v.counter !== undefined) { holder.append(el("div", { class: "sib" }, `counter ${v.counter}`)); continue; }
      const clock = Object.entries(v.clock).map(([k, c]) => `${k}:${c}`).join(" ");
      const text = `${v.tombstone ? "tombstone" : JSON.stringify(v.value)}  dot ${v.dot[0]}:${v.dot[1]}  clock {${clock}}`;
      holder.append(el("div", { class: v.tombstone ? "sib tomb" : "sib" }, text));
    }
    box.append(holder);
  }
  for (const r of f.relations) box.append(el("div", { class: "hint" }, `${r.a} vs ${r.b}: ${r.relation}`));
  box.append(el("div", { class: "hint" }, f.context ? `context of the last get: ${f.context}` : "no get of this key yet (its context shows after one)"));
}

// --- message sequence diagram -----------------------------------------------------------------
function drawRequests(s) {
  const tabs = document.getElementById("request-tabs");
  tabs.replaceChildren();
  if (shownRequest >= s.requests.length) shownRequest = 0;
  s.requests.forEach((r, i) => {
    const b = el("button", { type: "button", "aria-pressed": String(i === shownRequest) },
                 `${r.ok ? "" : "✖ "}${r.cmd} ${r.key} ${r.level}`);
    b.onclick = () => { shownRequest = i; drawRequests(state); };
    tabs.append(b);
  });
  drawSequence(s.requests[shownRequest], s.trace);
}
function drawSequence(r, tracing) {
  const box = document.getElementById("sequence");
  box.replaceChildren();
  box.removeAttribute("data-participants");
  if (!r) {
    box.setAttribute("width", 360); box.setAttribute("height", 40);
    box.append(svg("text", { x: 4, y: 20 }, tracing ? "No request yet: run a put or get." : "Type 'trace on', then a put or get."));
    return;
  }
  const cols = r.participants, left = 50, top = 44, rowH = 24, notesW = 130;
  const room = document.getElementById("sequence-box").clientWidth - left - notesW - 4;
  const colW = Math.max(50, Math.min(110, room / cols.length));
  const rows = Math.max(1, ...r.events.map((e) => e.row)) + 1;
  const notesX = left + cols.length * colW + 4;
  const width = notesX + notesW, height = top + rows * rowH + 24 + 14;  // the legend's line below
  box.setAttribute("width", width); box.setAttribute("height", height);
  box.setAttribute("data-participants", cols.join(","));
  box.setAttribute("data-coordinator", r.coordinator);
  const x = (name) => left + cols.indexOf(name) * colW + colW / 2;
  const y = (row) => top + row * rowH + rowH / 2;
  box.append(svg("text", { x: 4, y: 12 }, r.summary + (r.traced ? "" : " (no trace: type 'trace on')")));
  box.append(svg("text", { x: 4, y: height - 4, class: "note" },
                 "solid: request · dashed: answer · dotted ?: answered too late"));
  cols.forEach((name) => {
    const short = colW < 75;
    const role = name === "client" ? "" : name === r.coordinator ? (short ? "coord." : "coordinator")
      : r.replicas.includes(name) ? `${short ? "rep." : "replica"} ${r.replicas.indexOf(name) + 1}` : "fallback";
    box.append(svg("text", { x: x(name), y: 28, class: "head", "data-participant": name }, name));
    box.append(svg("text", { x: x(name), y: 39, class: "note", "text-anchor": "middle" }, role));
    box.append(svg("line", { x1: x(name), y1: top, x2: x(name), y2: height - 22, class: "lifeline" }));
  });
  const defs = svg("defs");
  defs.append(marker("arrow", "#58a6ff"), marker("arrow-reply", "#3fb950"), marker("arrow-lost", "#d29922"));
  box.append(defs);
  const rowsWithMs = new Set();
  for (const e of r.events) {
    if (!rowsWithMs.has(e.row)) { rowsWithMs.add(e.row); box.append(svg("text", { x: left - 6, y: y(e.row) + 3, class: "ms" }, `${e.ms.toFixed(1)} ms`)); }
    if (e.kind === "note") {  // the coordinator's own steps: a dot on its line, the words at the right
      box.append(svg("circle", { cx: x(e.at), cy: y(e.row), r: 3, fill: "#9aa7b4" }));
      const text = svg("text", { class: "note" });
      box.append(text);  // in the document first: wrapping measures the words
      const lines = wrapInto(text, e.text, notesX, notesW - 4, 3);
      text.setAttribute("y", y(e.row) + 3 - (lines - 1) * 5);
      text.append(svg("title", {}, e.text));
      continue;
    }
    let y1 = y(e.row), y2 = y(e.row), cls = "msg", mark = "arrow";
    if (e.answered !== undefined) y2 = y(e.row) + rowH / 2;
    if (e.reply_to !== undefined) { y1 = y(e.row) - rowH / 2; cls += " reply"; mark = "arrow-reply"; }
    if (e.answered === false) { cls += " lost"; mark = "arrow-lost"; }
    if (e.to === "client" || e.from !== "client" && e.to === r.coordinator && e.reply_to === undefined) { cls += " reply"; mark = "arrow-reply"; }
    if (e.label.startsWith("failed") || e.label.startsWith("refused")) cls += " fail";
    box.append(svg("line", { x1: x(e.from), y1, x2: x(e.to), y2, class: cls, "marker-end": `url(#${mark})`,
                             "data-from": e.from, "data-to": e.to }));
    const label = e.answered === false ? `${e.label} ?` : e.label;
    const late = e.answered === false;  // its label at the arrow's head, clear of the others
    const text = svg("text", { x: late ? x(e.to) - 4 : (x(e.from) + x(e.to)) / 2, y: Math.min(y1, y2) - 3,
                               "text-anchor": late ? "end" : "middle" }, label.slice(0, 22));
    text.append(svg("title", {}, e.label));
    box.append(text);
  }
}
// Write `words` into the (displayed) text element as lines no wider than `width` pixels, at most
// `most` of them (the rest is in the element's title); how many lines it took.
function wrapInto(text, words, x, width, most) {
  let line = svg("tspan", { x, dy: 0 }), lines = 1;
  text.append(line);
  for (const word of words.split(" ")) {
    const before = line.textContent;
    line.textContent = before ? `${before} ${word}` : word;
    if (!before || line.getComputedTextLength() <= width) continue;
    if (lines === most) { line.textContent = `${before} …`; break; }
    line.textContent = before;
    line = svg("tspan", { x, dy: 10 }, word);
    text.append(line);
    lines += 1;
  }
  return lines;
}
function marker(id, fill) {
  const m = svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  m.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill }));
  return m;
}

// --- latency histograms ------------------------------------------------------------------------
function drawLatency(s) {
  const box = document.getElementById("latency");
  box.replaceChildren();
  const entries = Object.entries(s.latency);
  if (!entries.length) { box.append(el("p", { class: "hint" }, "No requests measured yet.")); return; }
  for (const [name, h] of entries) {
    const div = el("div", { class: "hist", "data-op": name });
    div.append(el("div", {}, `${name}: ${h.count} requests, p50 ${h.p50_ms} ms, p99 ${h.p99_ms} ms`));
    const g = svg("svg", { viewBox: "0 0 150 50", preserveAspectRatio: "none" });
    const most = Math.max(1, ...h.bars), w = 150 / h.bars.length;
    h.bars.forEach((c, i) => {
      const bh = (c / most) * 38;
      const rect = svg("rect", { x: i * w + 1, y: 40 - bh, width: w - 2, height: bh });
      rect.append(svg("title", {}, `${c} at or below ${h.le_ms[i] === undefined ? "more" : h.le_ms[i] + " ms"}`));
      g.append(rect);
      if (i % 3 === 0) g.append(svg("text", { x: i * w + w / 2, y: 48 }, h.le_ms[i] === undefined ? ">" : String(+h.le_ms[i].toPrecision(2))));
    });
    div.append(g);
    box.append(div);
  }
}

// --- commands and focus ------------------------------------------------------------------------
async function post(path, body) {
  // The server's key for this run, written into the page it served: a page of another site has none.
  const key = document.querySelector('meta[name="bhandar-key"]').content;
  const headers = { "Content-Type": "application/json", "X-Bhandar-Key": key };
  const res = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
  return [res.ok, await res.json()];
}
async function run(line) {  // the session's log (in the next snapshot) shows what it printed
  const problem = document.getElementById("problem");
  problem.textContent = "";
  try {
    const [ok, answer] = await post("/api/command", { line });
    if (!ok) problem.textContent = `not run: ${answer.error}`;
  } catch (err) {
    problem.textContent = `the server did not answer: ${err}`;
  }
}
function drawLog(s) {  // every command of the session, typed here or in its terminal, newest first
  const out = document.getElementById("output");
  out.replaceChildren();
  for (const entry of s.log) {
    out.append(el("div", { class: "line" }, `> ${entry.line}`));
    out.append(el("div", { class: entry.ok ? "ok" : "err" }, entry.text));
  }
}
document.getElementById("command-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("command");
  if (input.value.trim()) run(input.value.trim());
  input.value = "";
});
document.getElementById("focus-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = document.getElementById("focus").value.trim();
  const cut = text.indexOf("/");
  if (cut > 0) await post("/api/focus", { keyspace: text.slice(0, cut), key: text.slice(cut + 1) });
});
const large = document.getElementById("large");
function setLarge(on) {
  document.body.classList.toggle("large", on);
  large.setAttribute("aria-pressed", String(on));
  localStorage.setItem("bhandar-large", on ? "1" : "");
}
large.onclick = () => setLarge(!document.body.classList.contains("large"));
setLarge(localStorage.getItem("bhandar-large") === "1");

// --- a demo's narration (bhandar demo NAME --web) -----------------------------------------------
const DEMO_STATE = { ready: "starts when Enter is pressed in its terminal", running: "running…",
                     passed: "✓ step done", failed: "✗ did not behave as expected",
                     done: "✓ done: every expectation met", stopped: "stopped" };
function drawDemo(s) {
  const panel = document.getElementById("demo-panel"), d = s.demo;
  panel.hidden = !d;
  if (!d) return;
  panel.dataset.state = d.state;
  panel.dataset.step = String(d.step);
  document.getElementById("demo-title").textContent = `· demo ${d.name}: ${d.title}`;
  document.getElementById("demo-progress").textContent =
    `${d.step ? `step ${d.step}/${d.steps}` : `${d.steps} steps`} · ${DEMO_STATE[d.state] || d.state}`;
  document.getElementById("demo-say").textContent = d.step ? d.say : d.summary;
  document.getElementById("demo-then").textContent = d.then;
  document.getElementById("demo-failure").textContent = d.failure;
  document.getElementById("demo-commands").textContent = d.commands.map((c) => `bhandar> ${c}`).join("\n");
  const checks = document.getElementById("demo-checks");
  checks.replaceChildren(...d.checks.map((c) => el("li", { class: c.ok ? "ok" : "fail" }, c.text)));
}

// --- the live stream ---------------------------------------------------------------------------
const drawn = {};
function drawPart(name, input, fn) {  // redraw a part only when what it shows changed
  const sig = JSON.stringify(input);
  if (drawn[name] !== sig) { drawn[name] = sig; fn(state); }
}
function draw(s) {
  state = s;
  drawNodes(s);
  drawPart("ring", [s.ring, s.focus && [s.focus.token, s.focus.replicas, s.focus.key], s.nodes.map((n) => n.id)], drawRing);
  drawPart("key", s.focus, drawKey);
  drawPart("requests", [s.requests, s.trace, shownRequest], drawRequests);
  drawPart("latency", s.latency, drawLatency);
  drawPart("log", s.log, drawLog);
  drawPart("demo", s.demo || null, drawDemo);
  document.body.setAttribute("data-drawn", String(Number(document.body.getAttribute("data-drawn") || 0) + 1));
}
const link = document.getElementById("link");
const events = new EventSource("/api/events");
events.addEventListener("state", (ev) => draw(JSON.parse(ev.data)));
events.onopen = () => { link.dataset.state = "live"; link.textContent = "● live"; };
events.onerror = () => { link.dataset.state = "lost"; link.textContent = "✖ reconnecting"; };
