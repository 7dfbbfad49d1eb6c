// broadcast and g-set in JavaScript: elements kept on disk before the ack, the whole set gossiped
// to every other node every 50 ms (so a restarted node gets back what the others have).
const fs = require("fs");
const path = require("path");

const dir = process.env.BHANDAR_CHECK_DIR;
const file = dir ? path.join(dir, "state.json") : null;
const seen = new Set(file && fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : []);
let id = "";
let ids = [];

function save() {
  if (!file) return;
  const fd = fs.openSync(file + ".tmp", "w");
  fs.writeSync(fd, JSON.stringify([...seen]));
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(file + ".tmp", file);
}

function send(dest, body) {
  process.stdout.write(JSON.stringify({ src: id, dest, body }) + "\n");
}

function reply(msg, body) {
  send(msg.src, { ...body, in_reply_to: msg.body.msg_id });
}

function add(x) {
  if (!seen.has(x)) {
    seen.add(x);
    save();
  }
}

function handle(msg) {
  const body = msg.body;
  switch (body.type) {
    case "init":
      id = body.node_id;
      ids = body.node_ids;
      return reply(msg, { type: "init_ok" });
    case "topology":
      return reply(msg, { type: "topology_ok" });
    case "broadcast":
      add(body.message);
      return reply(msg, { type: "broadcast_ok" });
    case "add":
      add(body.element);
      return reply(msg, { type: "add_ok" });
    case "read":
      return reply(msg, { type: "read_ok", messages: [...seen], value: [...seen] });
    case "gossip":
      for (const x of body.elements) add(x);
      return;
  }
}

setInterval(() => {
  for (const peer of ids) if (peer !== id) send(peer, { type: "gossip", elements: [...seen] });
}, 50);

let pending = "";
process.stdin.on("data", (chunk) => {
  pending += chunk;
  const lines = pending.split("\n");
  pending = lines.pop();
  for (const line of lines) if (line.trim()) handle(JSON.parse(line));
});
process.stdin.on("end", () => process.exit(0));
