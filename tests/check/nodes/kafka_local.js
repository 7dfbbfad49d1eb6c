// kafka done wrong, in JavaScript: each node keeps its own logs in memory and numbers offsets
// itself, with no coordination, so two nodes hand out the same offset of a key to different
// messages and a node's polls see only what was sent to it. MODE=reverse: one node (the logs
// are shared by nobody, so run it with --node-count 1) whose polls list the messages newest first.
let id = "";
const logs = new Map();
const committed = new Map();
const reverse = process.env.MODE === "reverse";

function reply(msg, body) {
  process.stdout.write(JSON.stringify({ src: id, dest: msg.src, body: { ...body, in_reply_to: msg.body.msg_id } }) + "\n");
}

function handle(msg) {
  const body = msg.body;
  switch (body.type) {
    case "init":
      id = body.node_id;
      return reply(msg, { type: "init_ok" });
    case "send": {
      if (!logs.has(body.key)) logs.set(body.key, []);
      const log = logs.get(body.key);
      log.push(body.msg);
      return reply(msg, { type: "send_ok", offset: log.length - 1 });
    }
    case "poll": {
      const msgs = {};
      for (const [key, start] of Object.entries(body.offsets)) {
        const pairs = (logs.get(key) || []).map((m, i) => [i, m]).slice(start);
        if (pairs.length) msgs[key] = reverse ? pairs.reverse() : pairs;
      }
      return reply(msg, { type: "poll_ok", msgs });
    }
    case "commit_offsets":
      for (const [key, offset] of Object.entries(body.offsets)) committed.set(key, offset);
      return reply(msg, { type: "commit_offsets_ok" });
    case "list_committed_offsets": {
      const offsets = {};
      for (const key of body.keys) if (committed.has(key)) offsets[key] = committed.get(key);
      return reply(msg, { type: "list_committed_offsets_ok", offsets });
    }
  }
}

let pending = "";
process.stdin.on("data", (chunk) => {
  pending += chunk;
  const lines = pending.split("\n");
  pending = lines.pop();
  for (const line of lines) if (line.trim()) handle(JSON.parse(line));
});
process.stdin.on("end", () => process.exit(0));
