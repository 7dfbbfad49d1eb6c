// Bhandar live view: draws the server's state snapshots (Server-Sent Events from /api/events).
// Drawing only: every number comes from the snapshot; commands go to /api/command, which runs them
// in the serving REPL session. Text is always set with textContent, never parsed as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7",
                 "#9c755f", "#e15759", "#bab0ac"];
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
  // The cluster's one-line summary, the words of the REPL's status bar (cluster_health.py).
  const summary = document.getElementById("summary");
  summary.textContent = s.health.line;
  summary.dataset.nodes = String(s.health.nodes);
  summary.dataset.running = String(s.health.running);
  document.getElementById("consistency").textContent = `consistency ${s.consistency}`;
  document.getElementById("tracing").textContent = s.trace ? "trace on" : "trace off (type: trace on)";
}

// Whether the node whose detector the cards' phi comes from (members_from) can reach node n.
function reachable(n) {
  const observer = state.nodes.find((m) => m.id === state.members_from);
  return !!observer && observer.group === n.group;
}
function card(n) {
  const c = el("div", { class: "card", id: `node-${n.id}`, "data-state": n.state, title: `${n.id}: ${n.meaning}` });
  const head = el("div", { class: "name" });
  head.append(el("span", { class: "swatch", style: `background:${colour(n.id)}` }), n.id);
  const buttons = el("span", { class: "buttons" });
  const kill = el("button", { type: "button", "data-action": "kill", "aria-label": `kill ${n.id}` }, "kill");
  const revive = el("button", { type: "button", "data-action": "revive", "aria-label": `revive ${n.id}` }, "revive");
  kill.disabled = n.state === "down" || n.state === "left";
  revive.disabled = n.state !== "down";
  kill.onclick = () => run(`kill ${n.id}`);
  revive.onclick = () => run(`revive ${n.id}`);
  buttons.append(kill, revive);
  head.append(buttons);
  c.append(head, el("div", { class: "state" }, n.mark));
  const dl = el("dl");
  const held = Object.entries(n.hints_for).map(([t, k]) => `${k}→${t}`).join(" ");
  // A peer silent for long has a phi in the millions (the odds it is still up: 1 in 10^phi): past
  // 1000 the number says nothing more than "certainly down" does, and no longer fits a card. A
  // partitioned node in another group than the observing one runs: its phi only says that no
  // message crosses, so the card says that instead of "certainly down".
  const pair = (k, v, wide) => dl.append(el("dt", {}, k), el("dd", { "data-field": k, class: wide ? "wide" : "" }, v));
  if (n.state === "partitioned" && !reachable(n)) {  // a row of its own, where phi would be
    const title = `unreachable from ${state.members_from}, whose detector the cards' phi is`;
    dl.append(el("dd", { "data-field": "phi", class: "full", title }, "unreachable"));
    pair("zone", n.zone);
  } else {
    pair("phi", n.state === "down" ? "—" : n.phi >= 1000 ? "∞" : n.phi.toFixed(1)); pair("zone", n.zone);
  }
  if (held) { pair("keys", String(n.keys), true); pair("hints", `${n.hints} (${held})`, true); }
  else { pair("keys", String(n.keys)); pair("hints", String(n.hints)); }
  // Who believes it down, where that is news: behind a partition, its group's frame says it.
  if (n.suspected_by.length && n.state !== "partitioned") pair("down to", n.suspected_by.join(","), true);
  c.append(dl);
  return c;
}

// --- fitting the screen -------------------------------------------------------------------------
// The page never scrolls and no panel does. A box whose list can outgrow it keeps the first items
// that fit whole and says how many it left out; nothing is cut in the middle of a line.
function rem(k = 1) { return k * parseFloat(getComputedStyle(document.documentElement).fontSize); }
function overflows(box) { return box.scrollHeight > box.clientHeight + 1 || box.scrollWidth > box.clientWidth + 1; }
function fit(box, noun, keep = 0) {
  let left = 0;
  while (overflows(box) && box.children.length > keep + 1) { box.lastElementChild.remove(); left += 1; }
  if (!left) return;
  const more = el(box.tagName === "UL" ? "li" : "div", { class: "more" });
  box.append(more);
  do {
    more.textContent = `… ${left} more ${noun} not shown`;
    if (!overflows(box) || box.children.length <= keep + 1) break;
    more.previousElementSibling.remove();
    left += 1;
  } while (true);  // eslint-disable-line no-constant-condition
}
// Scale a drawing made at its natural size (width x height, in px) down to its box, whole.
function fitSvg(node, width, height) {
  const box = node.parentElement;
  // Down to fit; up to half as large again on a big screen, where the box has room to spare.
  const scale = Math.min(1.5, box.clientWidth / width, box.clientHeight / height);
  node.setAttribute("viewBox", `0 0 ${width} ${height}`);
  node.setAttribute("width", Math.floor(width * scale));
  node.setAttribute("height", Math.floor(height * scale));
  node.dataset.scale = scale.toFixed(3);
}
function boxesMeet(a, b, pad = 0) {
  return a.x < b.x + b.width + pad && b.x < a.x + a.width + pad && a.y < b.y + b.height + pad && b.y < a.y + a.height + pad;
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
  // Labels in px of the screen, whatever the drawing's scale: the ring is 340 units across.
  const scale = Math.max(0.2, Math.min(ring.clientWidth, ring.clientHeight) / 340);
  const fs = rem(0.75) / scale;
  ring.style.fontSize = `${fs}px`;
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
  const labels = [];  // [arc, mid] of each arc, for the owner and zone labels drawn last
  arcs.forEach((a, i) => {
    const path = svg("path", { d: arcPath(a.lo, a.hi, 95, 135, space), fill: colour(a.owner),
                               stroke: "#101418", "stroke-width": 1, "data-owner": a.owner });
    if (marks.has(i)) path.classList.add("pref");
    path.append(svg("title", {}, `${a.owner} (${a.zone}): (${a.lo}, ${a.hi}]`));
    ring.append(path);
    const zi = zones.indexOf(a.zone);
    ring.append(svg("path", { d: arcPath(a.lo, a.hi, 138, 146, space),
      fill: ["#6e7681", "#30363d", "#c9d1d9", "#484f58"][zi % 4], stroke: "#101418" }));
    const span = ((a.hi - a.lo + space) % space) || space;
    labels.push([a, a.lo + span / 2, span]);
  });
  // What must show comes first; a label that would touch one already placed is left out (its
  // arc's tooltip still names it), so no two labels ever overlap.
  const placed = [];
  const place = (node) => {
    ring.append(node);
    const box = node.getBBox();
    if (placed.some((b) => boxesMeet(b, box, 1))) { node.remove(); return false; }
    placed.push(box);
    return true;
  };
  const r0 = fs * 0.75;  // a replica number's disc
  arcs.forEach((a, i) => {
    if (!marks.has(i)) return;
    const [, mid] = labels[i];
    for (let radius = 88 - r0; radius > r0; radius -= r0 * 0.6) {  // inwards until it is clear
      const [x, y] = polar(mid, radius - (marks.get(i) - 1) * r0 * 2.2, space);
      const g = svg("g", { "data-replica": a.owner });
      g.append(svg("circle", { cx: x, cy: y, r: r0, fill: "#fff" }),
               svg("text", { x, y, style: "fill:#000" }, String(marks.get(i))));
      if (place(g)) break;
    }
  });
  if (focus && focus.token !== null) {
    const [x, y] = polar(focus.token, 146, space);
    ring.insertBefore(svg("line", { x1: 0, y1: 0, x2: x, y2: y, stroke: "#fff", "stroke-dasharray": "3 2" }), ring.firstChild);
    for (let dy = 0; dy < 80; dy += fs) {
      if (place(svg("text", { x: 0, y: dy, class: "focus-label" }, `${focus.keyspace}/${focus.key}`))) break;
    }
  }
  for (const [a, mid, span] of labels) {
    const room = (span / space) * 2 * Math.PI * 115;  // the arc's length where its label sits
    if (room < fs * 0.9) continue;
    const [x, y] = polar(mid, 115, space);
    place(svg("text", { x, y, "font-weight": "bold", class: "owner-label" }, a.owner));
  }
  for (const [a, mid, span] of labels) {
    if ((span / space) * 2 * Math.PI * 155 < fs * 1.6) continue;
    const [x, y] = polar(mid, 146 + fs * 0.9, space);
    place(svg("text", { x, y, class: "zone-label" }, a.zone));
  }
  // The drawing's box is what it holds, so a label near the edge is never cut.
  const all = ring.getBBox();
  ring.setAttribute("viewBox", `${all.x - 2} ${all.y - 2} ${all.width + 4} ${all.height + 4}`);
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
// Holders that hold the same versions are one line ("C, E, A (replicas): 2 versions"): the
// siblings show once, and the relations between them go without saying.
function drawKey(s) {
  const box = document.getElementById("key");
  box.replaceChildren();
  const f = s.focus;
  if (!f) { box.append(el("p", { class: "hint" }, "Run a put or get, or type a key above.")); return; }
  box.append(el("div", {}, `${f.keyspace}/${f.key} · token ${f.token} · replicas ${f.replicas.join(", ")}` +
    (f.fallbacks.length ? ` · fallbacks ${f.fallbacks.join(", ")}` : "")));
  const same = new Map();  // what a holder holds (and as what) -> the holders
  for (const [node, versions] of Object.entries(f.holders)) {
    const role = f.down.includes(node) ? "down" : f.replicas.includes(node) ? "replica" : "hint";
    const sig = JSON.stringify([role, role === "down" ? node : versions]);
    if (!same.has(sig)) same.set(sig, { role, versions, nodes: [] });
    same.get(sig).nodes.push(node);
  }
  const ROLE = { replica: ["replica", "replicas"], hint: ["holds a hint", "hold hints"] };
  for (const { role, versions, nodes } of same.values()) {
    const holder = el("div", { class: "holder", "data-holder": nodes.join(",") });
    if (role === "down") {  // not asked: what it holds is unknown, not zero
      holder.append(el("b", {}, nodes.join(", ")), " (down, not asked): unknown until it is back");
      box.append(holder);
      continue;
    }
    const count = versions.length === 1 ? "1 version" : `${versions.length} versions`;
    holder.append(el("b", {}, nodes.join(", ")), ` (${ROLE[role][nodes.length > 1 ? 1 : 0]}): ${count}`);
    for (const v of versions) {
      if (v.counter !== undefined) { holder.append(el("div", { class: "sib" }, `counter ${v.counter}`)); continue; }
      const clock = Object.entries(v.clock).map(([k, c]) => `${k}:${c}`).join(" ");
      const text = `${v.tombstone ? "tombstone" : JSON.stringify(v.value)}  dot ${v.dot[0]}:${v.dot[1]}  clock {${clock}}`;
      holder.append(el("div", { class: v.tombstone ? "sib tomb" : "sib" }, text));
    }
    box.append(holder);
  }
  for (const r of f.relations) {
    if (r.relation !== "equal") box.append(el("div", { class: "hint" }, `${r.a} vs ${r.b}: ${r.relation}`));
  }
  box.append(el("div", { class: "hint" }, f.context ? `context of the last get: ${f.context}` : "no get of this key yet (its context shows after one)"));
  fit(box, "lines", 1);
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
  fit(tabs, "requests", Math.min(shownRequest + 1, s.requests.length) - 1);
  drawSequence(s.requests[shownRequest], s.trace);
}
// Drawn at its natural size in px (text in the page's size), then scaled down whole to its box.
// Every event has a row of its own (logical time, top to bottom), as tall as its words need, so
// no two labels share a line; a label too wide for the columns is set smaller, never cut.
function drawSequence(r, tracing) {
  const box = document.getElementById("sequence");
  const room = document.getElementById("sequence-box");
  box.replaceChildren();
  box.removeAttribute("data-participants");
  const f = rem(0.72), lineH = f * 1.25;
  box.style.fontSize = `${f}px`;
  if (!r) {
    const note = svg("text", { x: 4, y: f * 1.2 }, tracing ? "No request yet: run a put or get." : "Type 'trace on', then a put or get.");
    box.append(note);
    fitSvg(box, note.getComputedTextLength() + 8, f * 2);
    return;
  }
  // The times' column is as wide as its widest label: a slow run's "1234.5 ms" stays whole.
  const msLabel = (e) => `${e.ms.toFixed(1)} ms`;
  const probe = svg("text", { class: "ms" });
  box.append(probe);
  let msW = 0;
  for (const e of r.events) { probe.textContent = msLabel(e); msW = Math.max(msW, probe.getComputedTextLength()); }
  probe.remove();
  const cols = r.participants, left = Math.max(f * 4.8, msW + f), top = f * 4.2, rowH = f * 2.4;
  const notesW = Math.max(f * 11, room.clientWidth * 0.3);
  const colW = Math.max(f * 4.5, Math.min(f * 9, (room.clientWidth - left - notesW) / cols.length));
  const notesX = left + cols.length * colW + f * 0.4;
  const width = notesX + notesW;
  box.setAttribute("data-participants", cols.join(","));
  box.setAttribute("data-coordinator", r.coordinator);
  const x = (name) => left + cols.indexOf(name) * colW + colW / 2;
  const summary = svg("text", { class: "summary" });
  box.append(summary);
  const summaryLines = wrapInto(summary, r.summary + (r.traced ? "" : " (no trace: type 'trace on')"), 4, width - 8, lineH);
  summary.setAttribute("y", f);
  const head = f * 1.2 + summaryLines * lineH;
  // The rows: each event's y, each as tall as its note's lines need.
  const ys = [];
  let y = top + head;
  const notes = [];
  for (const e of r.events) {
    let h = rowH;
    if (e.kind === "note") {
      const text = svg("text", { class: "note" });
      box.append(text);  // in the document first: wrapping measures the words
      const lines = wrapInto(text, e.text, notesX, notesW - 4, lineH);
      text.append(svg("title", {}, e.text));
      notes.push([text, lines]);
      h = Math.max(rowH, lines * lineH + f * 0.6);
    }
    ys.push(y + h / 2);
    y += h;
  }
  const bottom = y;
  const height = bottom + lineH * 2.4;
  cols.forEach((name) => {
    const short = colW < f * 7;
    const role = name === "client" ? "" : name === r.coordinator ? (short ? "coord." : "coordinator")
      : r.replicas.includes(name) ? `${short ? "rep." : "replica"} ${r.replicas.indexOf(name) + 1}` : "fallback";
    box.append(svg("text", { x: x(name), y: head + f * 1.2, class: "head", "data-participant": name }, name));
    box.append(svg("text", { x: x(name), y: head + f * 2.4, class: "note", "text-anchor": "middle" }, role));
    box.append(svg("line", { x1: x(name), y1: head + f * 3, x2: x(name), y2: bottom, class: "lifeline" }));
  });
  const legend = svg("text", { class: "note" });
  box.append(legend);
  wrapInto(legend, "solid: request · dashed: answer · dotted ?: answered too late", 4, width - 8, lineH);
  legend.setAttribute("y", bottom + lineH * 1.2);
  const defs = svg("defs");
  defs.append(marker("arrow", "#58a6ff"), marker("arrow-reply", "#3fb950"), marker("arrow-lost", "#d29922"));
  box.append(defs);
  let lastMs = null, noteAt = 0;
  r.events.forEach((e, i) => {
    const at = ys[i];
    if (e.ms !== lastMs) { lastMs = e.ms; box.append(svg("text", { x: left - f * 0.5, y: at + f * 0.35, class: "ms" }, msLabel(e))); }
    if (e.kind === "note") {  // the coordinator's own steps: a dot on its line, the words at the right
      box.append(svg("circle", { cx: x(e.at), cy: at, r: 3, fill: "#9aa7b4" }));
      const [text, lines] = notes[noteAt++];
      text.setAttribute("y", at + f * 0.35 - (lines - 1) * lineH / 2);
      return;
    }
    let y1 = at, y2 = at, cls = "msg", mark = "arrow";
    if (e.answered !== undefined) y2 = at + rowH * 0.4;
    if (e.reply_to !== undefined) { y1 = at - rowH * 0.4; cls += " reply"; mark = "arrow-reply"; }
    if (e.answered === false) { cls += " lost"; mark = "arrow-lost"; }
    if (e.to === "client" || e.from !== "client" && e.to === r.coordinator && e.reply_to === undefined) { cls += " reply"; mark = "arrow-reply"; }
    if (e.label.startsWith("failed") || e.label.startsWith("refused")) cls += " fail";
    box.append(svg("line", { x1: x(e.from), y1, x2: x(e.to), y2, class: cls, "marker-end": `url(#${mark})`,
                             "data-from": e.from, "data-to": e.to }));
    const words = e.answered === false ? `${e.label} ?` : e.label;
    const text = svg("text", { y: Math.min(y1, y2) - f * 0.35, class: "label" }, words);
    text.append(svg("title", {}, e.label));
    box.append(text);
    const most = notesX - left - f * 0.4;  // the columns' width: a label stays inside it
    const natural = text.getComputedTextLength();
    if (natural > most) text.style.fontSize = `${f * most / natural}px`;
    const w = Math.min(natural, most);
    const late = e.answered === false;  // its label at the arrow's head, clear of the others
    const centre = late ? x(e.to) - f * 0.3 - w / 2 : (x(e.from) + x(e.to)) / 2;
    text.setAttribute("x", Math.max(left + w / 2, Math.min(notesX - f * 0.4 - w / 2, centre)));
    text.setAttribute("text-anchor", "middle");
  });
  fitSvg(box, width, height);
}
// Write `words` into the (displayed) text element as lines no wider than `width` pixels; how
// many lines it took. Nothing is left out: a long text takes more lines.
function wrapInto(text, words, x, width, lineH) {
  let line = svg("tspan", { x, dy: 0 }), lines = 1;
  text.append(line);
  for (const word of words.split(" ")) {
    const before = line.textContent;
    line.textContent = before ? `${before} ${word}` : word;
    if (!before || line.getComputedTextLength() <= width) continue;
    line.textContent = before;
    line = svg("tspan", { x, dy: lineH }, word);
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
    div.append(el("div", {}, `${name}: ${h.count}, p50 ${h.p50_ms} ms, p99 ${h.p99_ms} ms`));
    const g = svg("svg", { viewBox: "0 0 150 50", preserveAspectRatio: "none" });
    const most = Math.max(1, ...h.bars), w = 150 / h.bars.length;
    h.bars.forEach((c, i) => {
      const bh = (c / most) * 35;
      const rect = svg("rect", { x: i * w + 1, y: 37 - bh, width: w - 2, height: bh });
      rect.append(svg("title", {}, `${c} at or below ${h.le_ms[i] === undefined ? "more" : h.le_ms[i] + " ms"}`));
      g.append(rect);
      if (i % 3 === 0) {  // the first edge's label starts at the left side: centred, it would stick out
        const tick = h.le_ms[i] === undefined ? ">" : String(+h.le_ms[i].toPrecision(2));
        g.append(svg("text", i ? { x: i * w + w / 2, y: 46 } : { x: 0.5, y: 46, style: "text-anchor:start" }, tick));
      }
    });
    div.append(g);
    box.append(div);
  }
  fit(box, "histograms");
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
// The session's commands, typed here or in its terminal, oldest at the top and the newest at the
// bottom, a line per element. What does not fit is folded from the top: older output, never the
// newest command and its reply. A newest reply taller than the whole box (rare: the box holds a
// dozen lines) lets the box scroll, from that command's line down.
function drawLog(view) {
  const out = document.getElementById("output");
  out.replaceChildren();
  out.classList.remove("scrolls");
  out.dataset.laidOut = String(view.columns);  // the width the server laid the tables out at
  const entries = [...view.log].reverse();
  entries.forEach((entry, i) => {
    const newest = i === entries.length - 1 ? " newest" : "";
    out.append(el("div", { class: `line${newest}` }, `> ${entry.line}`));
    for (const line of entry.text.split("\n")) {
      out.append(el("div", { class: (entry.ok ? "ok" : "err") + newest }, line || " "));
    }
  });
  let left = 0;
  const older = () => out.firstElementChild && !out.firstElementChild.classList.contains("newest");
  while (overflows(out) && older()) { out.firstElementChild.remove(); left += 1; }
  if (left) {
    const more = el("div", { class: "more" }, "");
    out.prepend(more);
    for (;;) {
      more.textContent = `… ${left} older lines not shown`;
      if (!overflows(out) || !more.nextElementSibling || more.nextElementSibling.classList.contains("newest")) break;
      more.nextElementSibling.remove();
      left += 1;
    }
    if (overflows(out)) more.remove();  // room for the newest or for the note: the newest wins
  }
  if (overflows(out)) {
    out.classList.add("scrolls");
    out.scrollTop = out.querySelector(".newest").offsetTop - out.offsetTop;
  }
}
// The log box's width in characters of its font: the server lays its tables out that wide.
function logColumns() {
  const out = document.getElementById("output");
  const probe = el("span", { style: "position:absolute;visibility:hidden;white-space:pre" }, "0".repeat(100));
  out.append(probe);
  const char = probe.getBoundingClientRect().width / 100;
  probe.remove();
  const cs = getComputedStyle(out);
  const room = out.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  return char > 0 ? Math.floor(room / char) : 0;
}
// The log as the snapshot names it, printed at this page's own width (GET /api/log): fetched when
// the log or the width changed; of overlapping fetches only the latest one is drawn.
let logAsked = 0;
async function fetchLog() {
  const columns = logColumns();
  document.getElementById("output").dataset.columns = String(columns);
  const asked = ++logAsked;
  try {
    const res = await fetch(`/api/log?columns=${Math.max(columns, 1)}`);
    const view = await res.json();
    if (asked !== logAsked) return;
    if (res.ok) drawLog(view); else throw new Error(view.error);
  } catch (err) {  // the snapshot's own print (80 wide) rather than none; the box says why
    if (asked !== logAsked || !state) return;
    drawLog({ columns: 0, log: state.log });
    document.getElementById("problem").textContent = `the log at this width failed: ${err}`;
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
  redrawAll();
}
large.onclick = () => setLarge(!document.body.classList.contains("large"));

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
  const commands = document.getElementById("demo-commands");
  commands.replaceChildren(...d.commands.map((c) => el("div", {}, `bhandar> ${c}`)));
  fit(commands, "commands");
  const checks = document.getElementById("demo-checks");
  checks.replaceChildren(...d.checks.map((c) => el("li", { class: c.ok ? "ok" : "fail" }, c.text)));
  fit(checks, "checks");
}

// --- the live stream ---------------------------------------------------------------------------
const drawn = {};
function drawPart(name, input, fn) {  // redraw a part only when what it shows changed
  const sig = JSON.stringify(input);
  if (drawn[name] !== sig) { drawn[name] = sig; fn(state); }
}
function draw(s) {
  state = s;
  // The narration first: the panels below get the height it leaves.
  drawPart("demo", s.demo || null, drawDemo);
  drawNodes(s);
  drawPart("log", s.log, fetchLog);  // the entries at the snapshot's width stand for them at any
  drawPart("key", s.focus, drawKey);
  drawPart("ring", [s.ring, s.focus && [s.focus.token, s.focus.replicas, s.focus.key], s.nodes.map((n) => n.id)], drawRing);
  drawPart("latency", s.latency, drawLatency);
  drawPart("requests", [s.requests, s.trace, shownRequest], drawRequests);
  document.body.setAttribute("data-drawn", String(Number(document.body.getAttribute("data-drawn") || 0) + 1));
  // For whoever checks the layout: the window size and text size this drawing was fitted to.
  document.body.dataset.fitted = `${innerWidth}x${innerHeight}${document.body.classList.contains("large") ? " large" : ""}`;
}
// A new window size or text size: everything is fitted again.
function redrawAll() {
  for (const name of Object.keys(drawn)) delete drawn[name];
  if (state) draw(state);
}
// A box that fits its content to its size is fitted again whenever that size changes: a new
// window or text size, or a neighbour that grew (a card that gained a line, the narration).
let refit = 0;
const boxes = new ResizeObserver(() => {
  document.body.dataset.fitted = "refitting";
  cancelAnimationFrame(refit);
  refit = requestAnimationFrame(redrawAll);
});
for (const id of ["output", "ring", "key", "request-tabs", "sequence-box", "latency", "demo-commands", "demo-checks"]) {
  boxes.observe(document.getElementById(id));
}
setLarge(localStorage.getItem("bhandar-large") === "1");
const link = document.getElementById("link");
// The stream needs this run's key too (an EventSource sends no header of its own).
const pageKey = document.querySelector('meta[name="bhandar-key"]').content;
const events = new EventSource("/api/events?key=" + encodeURIComponent(pageKey));
// Live from the first state this stream brought (the server builds it fresh for a new stream), not
// from the connection alone: until then the page has nothing of the cluster to show as live.
events.addEventListener("state", (ev) => {
  draw(JSON.parse(ev.data));
  if (link.dataset.state !== "live") { link.dataset.state = "live"; link.textContent = "● live"; }
});
// The server keeps a few streams: a newer page took this one's place, so stop reconnecting.
events.addEventListener("replaced", () => {
  events.close();
  link.dataset.state = "lost";
  link.textContent = "✖ opened in another tab: reload to watch here";
});
events.onerror = () => { link.dataset.state = "lost"; link.textContent = "✖ reconnecting"; };
