// Part 1: ring with V virtual nodes per server. Spread of keys, and keys moved when E joins.
const arg = (name, dflt) => { const i = process.argv.indexOf("--" + name); return i < 0 ? dflt : process.argv[i + 1]; }; // test copy: parameters from argv
function mulberry32(a) { return () => { a = (a + 0x6D2B79F5) | 0; let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
function hash(s) {                                   // FNV-1a 32-bit + a final mix step
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b); h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
function ring(servers, V) {                          // sorted tokens: [position, server]
  const t = [];
  for (const s of servers) for (let v = 0; v < V; v++) t.push([hash(s + ":" + v), s]);
  return t.sort((a, b) => a[0] - b[0]);
}
function owner(tokens, h) {                          // first token clockwise (binary search)
  let lo = 0, hi = tokens.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (tokens[m][0] < h) lo = m + 1; else hi = m; }
  return tokens[lo % tokens.length][1];
}
const rnd = mulberry32(Number(arg("seed", 61))), K = Number(arg("keys", 20000));
const keys = Array.from({ length: K }, () => hash("user:" + Math.floor(rnd() * 1e9)));
const four = ["A", "B", "C", "D"], five = [...four, "E"];
console.log("V".padEnd(6) + four.map(s => s.padStart(6)).join("") + "stddev".padStart(12) + "max/mean".padStart(10) + "moved".padStart(10));
for (const V of String(arg("vnodes", "1,10,100")).split(",").map(Number)) {
  const r4 = ring(four, V), r5 = ring(five, V), cnt = { A: 0, B: 0, C: 0, D: 0 };
  let moved = 0;
  for (const h of keys) { const o = owner(r4, h); cnt[o]++; if (owner(r5, h) !== o) moved++; }
  const c = four.map(s => cnt[s]), mean = K / 4;
  const sd = Math.sqrt(c.reduce((s, x) => s + (x - mean) ** 2, 0) / 4);
  console.log(String(V).padEnd(6) + c.map(x => String(x).padStart(6)).join("") + "   " +
    String(Math.round(sd)).padStart(9) + "    " + (Math.max(...c) / mean).toFixed(2).padStart(6) +
    "   " + (100 * moved / K).toFixed(1).padStart(6) + "%");
}
const naive = keys.filter(h => h % 4 !== h % 5).length;      // hash mod N: 4 -> 5 servers
console.log("naive hash mod N (4 -> 5 servers) moves " + (100 * naive / K).toFixed(1) + "% of keys; ideal is 20.0%");
