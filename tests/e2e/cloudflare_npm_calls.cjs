// Every queue call of an installed npm `cloudflare` SDK against a Sluice URL, each answer checked against
// the shape the SDK's own type declarations give it (TypeScript types do not exist at run time, so the
// fields a caller reads are checked here). Run: `node cloudflare_npm_calls.cjs NODE_MODULES PACKAGE URL
// TOKEN PREFIX`; prints `{"version", "calls": [...], "warnings": "array" | "object"}` and exits non-zero on
// the first failure. PACKAGE is `cloudflare-4` (npm 4.5.0, an alias) or `cloudflare` (the latest).
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

const [nodeModules, pkg, url, token, prefix] = process.argv.slice(2);
const load = createRequire(path.join(nodeModules, "noop.js"));
const Cloudflare = load(pkg);
const version = JSON.parse(fs.readFileSync(path.join(nodeModules, pkg, "package.json"), "utf8")).version;
const major = Number(version.split(".")[0]);
const ACCOUNT = "0123456789abcdef0123456789abcdef";
const account_id = ACCOUNT;

function check(cond, what) {
  if (!cond) throw new Error(`${pkg} ${version}: ${what}`);
}

function isQueue(q) {
  return typeof q.queue_id === "string" && typeof q.queue_name === "string" && typeof q.settings === "object";
}

async function all(page) {
  const items = [];
  for await (const item of page) items.push(item);
  return items;
}

async function main() {
  const client = new Cloudflare({ apiToken: token, baseURL: `${url}/client/v4`, maxRetries: 0 });
  const q = client.queues;
  const calls = [];
  const call = async (name, fn) => {
    const out = await fn();
    calls.push(name);
    return out;
  };

  const queue_name = `${prefix}-q`;
  const created = await call("queues.create", () => q.create({ account_id, queue_name }));
  check(isQueue(created) && created.queue_id.length === 32, "queues.create answers a Queue");
  const qid = created.queue_id;
  check(isQueue(await call("queues.get", () => q.get(qid, { account_id }))), "queues.get");
  const listed = await call("queues.list", () => all(q.list({ account_id })));
  check(listed.some((x) => x.queue_id === qid), "queues.list holds the queue");
  const settings = { delivery_delay: 0, message_retention_period: 3600 };
  const updated = await call("queues.update", () => q.update(qid, { account_id, queue_name, settings }));
  check(updated.settings.message_retention_period === 3600, "queues.update keeps settings");
  const edited = await call("queues.edit", () =>
    q.edit(qid, { account_id, settings: { delivery_paused: false } }),
  );
  check(edited.settings.message_retention_period === 3600, "queues.edit (PATCH) keeps what it was not given");

  const m = q.messages;
  await call("messages.push", () => m.push(qid, { account_id, body: { n: 1 }, content_type: "json" }));
  const bulk = [
    { body: "two", content_type: "text" },
    { body: { n: 3 }, content_type: "json" },
  ];
  await call("messages.bulkPush", () => m.bulkPush(qid, { account_id, messages: bulk, delay_seconds: 0 }));
  const pulled = await call("messages.pull", () =>
    m.pull(qid, { account_id, batch_size: 3, visibility_timeout_ms: 30000 }),
  );
  check(Array.isArray(pulled.messages) && pulled.messages.length === 3, "messages.pull answers 3 messages");
  check(pulled.messages.every((x) => typeof x.lease_id === "string" && typeof x.attempts === "number"), "leases");
  const leases = pulled.messages.map((x) => x.lease_id);
  const acked = await call("messages.ack", () =>
    m.ack(qid, {
      account_id,
      acks: [{ lease_id: leases[0] }, { lease_id: "not-a-lease" }],
      retries: [{ lease_id: leases[1], delay_seconds: 0 }],
    }),
  );
  check(acked.ackCount === 1 && acked.retryCount === 1, "messages.ack counts");
  // The declared type: `Array<string>` up to 5.x, `{ [key: string]: string }` from 6.0 on.
  const warnings = Array.isArray(acked.warnings) ? "array" : typeof acked.warnings;
  const declared = major < 6 ? "array" : "object";
  check(warnings === declared, `messages.ack warnings is ${warnings}, the SDK declares ${declared}`);
  check(Object.keys(acked.warnings).length === 1, "one warning");
  if (major >= 6) {
    const metrics = await call("queues.getMetrics", () => q.getMetrics(qid, { account_id }));
    check(metrics.backlog_count === 2, "queues.getMetrics backlog");
  }

  await call("purge.start", () => q.purge.start(qid, { account_id, delete_messages_permanently: true }));
  const status = await call("purge.status", () => q.purge.status(qid, { account_id }));
  check(status.completed === "true" && typeof status.started_at === "string", "purge.status");

  const c = q.consumers;
  const http = await call("consumers.create(http_pull)", () =>
    c.create(qid, {
      account_id,
      type: "http_pull",
      dead_letter_queue: `${prefix}-dlq`,
      settings: { batch_size: 7, max_retries: 4, visibility_timeout_ms: 20000 },
    }),
  );
  check(http.settings.batch_size === 7 && typeof http.consumer_id === "string", "consumers.create(http_pull)");
  const worker = await call("consumers.create(worker)", () =>
    c.create(qid, {
      account_id,
      type: "worker",
      script_name: "https://example.com/hook",
      settings: { batch_size: 10, max_retries: 2, max_wait_time_ms: 500 },
    }),
  );
  const cid = worker.consumer_id;
  const change = { account_id, type: "worker", script_name: "https://example.com/hook2", settings: { batch_size: 20 } };
  await call("consumers.update", () =>
    major < 6 ? c.update(qid, cid, change) : c.update(cid, { ...change, queue_id: qid }),
  );
  let consumers;
  let got;
  if (major < 5) {
    consumers = await call("consumers.get", () => all(c.get(qid, { account_id }))); // 4.x: the list
    got = consumers.find((x) => x.consumer_id === cid);
  } else if (major === 5) {
    got = await call("consumers.get", () => c.get(qid, cid, { account_id }));
    consumers = await call("consumers.list", () => all(c.list(qid, { account_id })));
  } else {
    got = await call("consumers.get", () => c.get(cid, { account_id, queue_id: qid }));
    consumers = await call("consumers.list", () => all(c.list(qid, { account_id })));
  }
  check(got.script_name === "https://example.com/hook2" && got.settings.batch_size === 20, "updated consumer");
  check(new Set(consumers.map((x) => x.type)).size === 2, "both consumer types listed");
  for (const id of [cid, http.consumer_id]) {
    await call("consumers.delete", () =>
      major < 6 ? c.delete(qid, id, { account_id }) : c.delete(id, { account_id, queue_id: qid }),
    );
  }
  if (major >= 6) {
    await m.push(qid, { account_id, body: "peek me", content_type: "text" });
    await m.pull(qid, { account_id, batch_size: 1 });
    const peeked = await call("messages.peek", () => m.peek(qid, { account_id, batch_size: 5 }));
    check(peeked.messages.length === 1 && peeked.messages[0].attempts === 1, "messages.peek");
    const purged = await call("messages.purge", () =>
      m.purge(qid, { account_id, refs: [{ ref: peeked.messages[0].ref }] }),
    );
    check(typeof purged === "object", "messages.purge");
  }
  await call("queues.delete", () => q.delete(qid, { account_id }));
  process.stdout.write(JSON.stringify({ version, calls, warnings }));
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
