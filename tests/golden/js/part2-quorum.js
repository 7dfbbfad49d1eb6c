// Part 2: quorum put then get on N = 3 replicas. Replica 2 is down for rounds 3000-5999.
const arg = (name, dflt) => { const i = process.argv.indexOf("--" + name); return i < 0 ? dflt : process.argv[i + 1]; }; // test copy: parameters from argv
function mulberry32(a) { return () => { a = (a + 0x6D2B79F5) | 0; let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
const N = 3, ROUNDS = Number(arg("rounds", 10000)), TIMEOUT = 100;
const p99 = a => { const s = [...a].sort((x, y) => x - y); return s[Math.ceil(0.99 * s.length) - 1]; };
function run(R, W) {
  const rnd = mulberry32(Number(arg("seed", 2026)));                      // same latencies for every (R, W)
  const lat = () => 1 + -Math.log(1 - rnd()) + (rnd() < 0.03 ? 40 + 40 * rnd() : 0); // ms
  const has = [0, 0, 0];                             // version held by each replica
  let acked = 0, putOk = 0, getOk = 0, stale = 0; const pl = [], gl = [];
  for (let v = 1; v <= ROUNDS; v++) {
    const up = [true, !(v >= 3000 && v < 6000), true];
    const w = [0, 1, 2].map(i => ({ i, t: lat() })).filter(x => up[x.i]).sort((a, b) => a.t - b.t);
    if (w.length >= W) {                             // success after the W-th fastest ack
      const T = w[W - 1].t; acked = v; putOk++; pl.push(T);
      for (const x of w) if (x.t <= T) has[x.i] = v; // the slower replicas apply it later
    } else pl.push(TIMEOUT);
    const r = [0, 1, 2].map(i => ({ i, t: lat() })).filter(x => up[x.i]).sort((a, b) => a.t - b.t);
    if (r.length >= R) {
      getOk++; gl.push(r[R - 1].t);
      if (Math.max(...r.slice(0, R).map(x => has[x.i])) < acked) stale++;
    } else gl.push(TIMEOUT);
    for (const x of w) has[x.i] = v;                 // in-flight writes land before the next round
  }
  console.log(`(R,W)=(${R},${W})  put ok ${(100 * putOk / ROUNDS).toFixed(1)}%  get ok ${(100 * getOk / ROUNDS).toFixed(1)}%` +
    `  put p99 ${p99(pl).toFixed(1)} ms  get p99 ${p99(gl).toFixed(1)} ms  stale reads ${stale}`);
}
for (const [R, W] of [[1, 1], [2, 2], [1, 3]]) run(R, W);
