// `@durable-streams/client` tailing a JSON stream with `live: "sse"` while 5 items are appended 400 ms
// apart (docs/api.md, "Open Durable Streams protocol"). Run: `node durable_streams_live_sse.cjs
// NODE_MODULES STREAM_URL`; prints `{"version", "items", "latencies_ms", "warnings"}` once all 5 arrived
// or 30 s passed. `warnings` holds what the client printed with console.warn (its long-poll fallback
// announces itself there).
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

const [nodeModules, url] = process.argv.slice(2);
const load = createRequire(path.join(nodeModules, "noop.js"));
const { stream } = load("@durable-streams/client");
const pkg = path.join(nodeModules, "@durable-streams", "client", "package.json");
const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;

const warnings = [];
console.warn = (...args) => warnings.push(args.join(" "));
const COUNT = 5;
const GAP_MS = 400;

async function main() {
  const created = await fetch(url, { method: "PUT", headers: { "Content-Type": "application/json" } });
  if (created.status !== 201) throw new Error(`PUT ${url}: ${created.status}`);
  const tail = created.headers.get("Stream-Next-Offset");
  const sentAt = [];
  const items = [];
  const latencies = [];
  const controller = new AbortController();
  const done = new Promise((resolve) => {
    const timer = setTimeout(resolve, 30000);
    stream({ url, offset: tail, live: "sse", json: true, signal: controller.signal, warnOnHttp: false }).then(
      (res) => {
        res.subscribeJson((batch) => {
          for (const item of batch.items) {
            items.push(item);
            latencies.push(Date.now() - sentAt[item.n]);
          }
          if (items.length >= COUNT) {
            clearTimeout(timer);
            resolve();
          }
        });
      },
    );
  });
  await new Promise((r) => setTimeout(r, 500)); // the reader is connected before the first append
  for (let n = 0; n < COUNT; n++) {
    sentAt[n] = Date.now();
    const appended = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ n }),
    });
    if (appended.status !== 204 && appended.status !== 200) throw new Error(`append ${n}: ${appended.status}`);
    await new Promise((r) => setTimeout(r, GAP_MS));
  }
  await done;
  controller.abort();
  process.stdout.write(JSON.stringify({ version, items, latencies_ms: latencies, warnings }));
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
