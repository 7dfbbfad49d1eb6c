// txn-rw-register and txn-list-append in JavaScript, broken: one store per node, each micro-op
// applied as it comes; a transaction that writes (or appends) a multiple of 4 is then refused
// with error 30 (txn-conflict), but what it wrote stays: later reads see the writes of failed
// transactions (G1a, aborted read). Without that one refusal it would be a correct single node.
const readline = require("readline");

const store = new Map(); // key (as JSON) -> value, or list for appends
let id = "";

function send(dest, body) {
  process.stdout.write(JSON.stringify({ src: id, dest, body }) + "\n");
}

function reply(msg, body) {
  send(msg.src, { ...body, in_reply_to: msg.body.msg_id });
}

function run(mops) {
  let refuse = false;
  const out = mops.map(([f, k, v]) => {
    const key = JSON.stringify(k);
    if (f === "r") {
      const value = store.has(key) ? store.get(key) : null;
      return [f, k, Array.isArray(value) ? [...value] : value];
    }
    store.set(key, f === "append" ? [...(store.get(key) || []), v] : v);
    if (v % 4 === 0) refuse = true;
    return [f, k, v];
  });
  return refuse ? null : out;
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  const body = msg.body;
  if (body.type === "init") {
    id = body.node_id;
    return reply(msg, { type: "init_ok" });
  }
  if (body.type === "txn") {
    const done = run(body.txn);
    if (done === null) return reply(msg, { type: "error", code: 30, text: "txn-conflict: try again" });
    return reply(msg, { type: "txn_ok", txn: done });
  }
  if (body.msg_id !== undefined) reply(msg, { type: "error", code: 10, text: `no ${body.type}` });
});
