// Part 4: mini store. 5 nodes, ring (8 vnodes each), N=3, W=2, R=2. D down 2000-5999, E down 4000-5999.
const arg = (name, dflt) => { const i = process.argv.indexOf("--" + name); return i < 0 ? dflt : process.argv[i + 1]; }; // test copy: parameters from argv
function mulberry32(a) { return () => { a = (a + 0x6D2B79F5) | 0; let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
const hash = s => { let h = 0x811c9dc5; for (const ch of s) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b); h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35); return (h ^ (h >>> 16)) >>> 0; };
const NODES = ["A", "B", "C", "D", "E"], N = 3, W = 2, R = 2, OPS = Number(arg("ops", 8000)), KEYS = Number(arg("keys", 300)), DETECT = Number(arg("detect", 300));
const tokens = NODES.flatMap(n => [...Array(8).keys()].map(v => [hash(n + ":" + v), n])).sort((a, b) => a[0] - b[0]);
const walk = k => { const h = hash("k" + k), out = [];            // distinct nodes clockwise from the key
  for (let i = tokens.findIndex(t => t[0] >= h), j = 0; out.length < 5; j++) {
    const n = tokens[((i < 0 ? 0 : i) + j) % tokens.length][1]; if (!out.includes(n)) out.push(n); } return out; };
const down = { D: [2000, 6000], E: [4000, 6000] }, up = (n, t) => !(down[n] && t >= down[n][0] && t < down[n][1]);
function run(mode) {                                 // "strict", "sloppy, no handoff", "sloppy + hints"
  const rnd = mulberry32(Number(arg("seed", 54))), has = {}, acked = {}, hints = [];
  NODES.forEach(n => has[n] = {});
  let ok = 0, tries = 0, stale = 0, delivered = 0;
  for (let t = 0; t < OPS; t++) {
    for (const n in down) if (mode === "sloppy + hints" && t === down[n][1] + DETECT)   // gossip says n is back
      for (const h of hints.filter(h => h.to === n && !h.done)) { has[n][h.k] = Math.max(has[n][h.k] || 0, h.v); h.done = true; delivered++; }
    const k = Math.floor(rnd() * KEYS), isPut = rnd() < 0.5, w = walk(k), home = w.slice(0, N);
    const set = mode === "strict" ? home.filter(n => up(n, t)) : w.filter(n => up(n, t)).slice(0, N);
    const pick = set.map(n => [rnd(), n]).sort((a, b) => a[0] - b[0]).map(x => x[1]);   // fastest replies first
    tries++;
    if (isPut) {
      for (const n of set) has[n][k] = t + 1;        // partial writes stay even if the put fails
      if (mode === "sloppy + hints") set.filter(n => !home.includes(n)).forEach((n, i) =>
        hints.push({ to: home.filter(x => !up(x, t))[i], k, v: t + 1 }));
      if (set.length >= W) { ok++; acked[k] = t + 1; }
    } else if (set.length >= R) {
      ok++; if (Math.max(...pick.slice(0, R).map(n => has[n][k] || 0)) < (acked[k] || 0)) stale++;
    }
  }
  console.log(mode.padEnd(19) + `availability ${(100 * ok / tries).toFixed(2)}%  stale reads ${stale}` +
    `  hints stored ${hints.length}  delivered ${delivered}`);
}
["strict", "sloppy, no handoff", "sloppy + hints"].forEach(run);
