// The AWS SDK for JavaScript v3 (`@aws-sdk/client-sqs`, AWS JSON 1.0 with its MD5 checks of bodies and
// attributes on) and BBC's `sqs-consumer` on it, unchanged, against a Sluice URL: the SQS actions a Node
// service calls, each answer checked against what SQS answers, then a consumer that processes 200 messages
// with one handler failure (the message comes back after its visibility timeout) and deletes them in
// batches. Run: `node sqs_js_calls.cjs NODE_MODULES URL ACCESS_KEY_ID SECRET PREFIX`; prints
// `{"version", "consumer_version", "calls": [...], "processed", "attempts"}` and exits non-zero on the
// first failure.
"use strict";
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

const [nodeModules, url, accessKeyId, secretAccessKey, prefix] = process.argv.slice(2);
const load = createRequire(path.join(nodeModules, "noop.js"));
const sdk = load("@aws-sdk/client-sqs");
const { Consumer } = load("sqs-consumer");
const versionOf = (pkg) =>
  JSON.parse(fs.readFileSync(path.join(nodeModules, pkg, "package.json"), "utf8")).version;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

const md5 = (text) => crypto.createHash("md5").update(text, "utf8").digest("hex");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const sqs = new sdk.SQSClient({
    endpoint: url,
    region: "us-east-1",
    credentials: { accessKeyId, secretAccessKey },
    maxAttempts: 2,
  });
  const calls = new Set();
  const send = async (Command, input) => {
    const out = await sqs.send(new sdk[Command](input));
    calls.add(Command.replace(/Command$/, ""));
    return out;
  };
  const refused = async (Command, input, name) => {
    try {
      await send(Command, input);
    } catch (err) {
      check(err.name === name, `${Command}: ${name} expected, got ${err.name}: ${err.message}`);
      calls.add(Command.replace(/Command$/, ""));
      return;
    }
    throw new Error(`${Command} must be refused with ${name}`);
  };

  // queues: create (idempotent), url, list, attributes, tags
  const dlq = (await send("CreateQueueCommand", { QueueName: `${prefix}-dlq` })).QueueUrl;
  const dlqArn = (await send("GetQueueAttributesCommand", { QueueUrl: dlq, AttributeNames: ["QueueArn"] }))
    .Attributes.QueueArn;
  const redrive = JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 5 });
  const attributes = { VisibilityTimeout: "30", RedrivePolicy: redrive };
  const q = (await send("CreateQueueCommand", { QueueName: `${prefix}-q`, Attributes: attributes, tags: { team: "a" } }))
    .QueueUrl;
  check((await send("CreateQueueCommand", { QueueName: `${prefix}-q`, Attributes: attributes })).QueueUrl === q, "idempotent create");
  await refused("CreateQueueCommand", { QueueName: `${prefix}-q`, Attributes: { VisibilityTimeout: "31" } }, "QueueNameExists");
  check((await send("GetQueueUrlCommand", { QueueName: `${prefix}-q` })).QueueUrl === q, "queue url");
  const listed = (await send("ListQueuesCommand", { QueueNamePrefix: prefix })).QueueUrls;
  check(listed.includes(q) && listed.includes(dlq), `listed ${listed}`);
  await send("SetQueueAttributesCommand", { QueueUrl: q, Attributes: { ReceiveMessageWaitTimeSeconds: "1" } });
  const got = (await send("GetQueueAttributesCommand", { QueueUrl: q, AttributeNames: ["All"] })).Attributes;
  check(got.ReceiveMessageWaitTimeSeconds === "1" && JSON.parse(got.RedrivePolicy).maxReceiveCount === 5, JSON.stringify(got));
  await send("TagQueueCommand", { QueueUrl: q, Tags: { env: "test" } });
  await send("UntagQueueCommand", { QueueUrl: q, TagKeys: ["team"] });
  const tags = (await send("ListQueueTagsCommand", { QueueUrl: q })).Tags;
  check(JSON.stringify(tags) === JSON.stringify({ env: "test" }), `tags ${JSON.stringify(tags)}`);
  const sources = (await send("ListDeadLetterSourceQueuesCommand", { QueueUrl: dlq })).queueUrls;
  check(sources.length === 1 && sources[0] === q, `sources ${sources}`);

  // messages: the SDK checks every MD5 it is given; typed attributes come back as sent
  const body = "hello <SQS> & ü";
  const messageAttributes = {
    n: { DataType: "Number", StringValue: "42" },
    s: { DataType: "String.custom", StringValue: "é" },
    b: { DataType: "Binary", BinaryValue: Uint8Array.from([0, 255]) },
  };
  const sent = await send("SendMessageCommand", { QueueUrl: q, MessageBody: body, MessageAttributes: messageAttributes });
  check(sent.MD5OfMessageBody === md5(body) && sent.MessageId, JSON.stringify(sent));
  const batch = await send("SendMessageBatchCommand", {
    QueueUrl: q,
    Entries: [{ Id: "a", MessageBody: "one" }, { Id: "b", MessageBody: "two", DelaySeconds: 0 }],
  });
  check(batch.Successful.map((e) => e.Id).sort().join() === "a,b" && !(batch.Failed || []).length, JSON.stringify(batch));
  const received = [];
  const deadline = Date.now() + 20_000;
  while (received.length < 3 && Date.now() < deadline) {
    const page = await send("ReceiveMessageCommand", {
      QueueUrl: q,
      MaxNumberOfMessages: 10,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
      WaitTimeSeconds: 1,
    });
    received.push(...(page.Messages || []));
  }
  const byBody = Object.fromEntries(received.map((m) => [m.Body, m]));
  check(Object.keys(byBody).sort().join() === [body, "one", "two"].sort().join(), Object.keys(byBody).join());
  const first = byBody[body];
  check(first.MD5OfMessageAttributes === sent.MD5OfMessageAttributes, "attribute MD5");
  check(first.MessageAttributes.n.StringValue === "42" && first.MessageAttributes.s.DataType === "String.custom", "attributes");
  check(Buffer.from(first.MessageAttributes.b.BinaryValue).equals(Buffer.from([0, 255])), "binary attribute");
  check(first.Attributes.ApproximateReceiveCount === "1" && first.Attributes.SenderId === accessKeyId, JSON.stringify(first.Attributes));
  await send("ChangeMessageVisibilityCommand", { QueueUrl: q, ReceiptHandle: first.ReceiptHandle, VisibilityTimeout: 60 });
  const changed = await send("ChangeMessageVisibilityBatchCommand", {
    QueueUrl: q,
    Entries: [{ Id: "x", ReceiptHandle: byBody.one.ReceiptHandle, VisibilityTimeout: 0 }],
  });
  check(changed.Successful.map((e) => e.Id).join() === "x", JSON.stringify(changed));
  const again = await send("ReceiveMessageCommand", { QueueUrl: q, MessageSystemAttributeNames: ["ApproximateReceiveCount"], WaitTimeSeconds: 2 });
  check(again.Messages[0].Body === "one" && again.Messages[0].Attributes.ApproximateReceiveCount === "2", JSON.stringify(again.Messages));
  await send("DeleteMessageCommand", { QueueUrl: q, ReceiptHandle: first.ReceiptHandle });
  const deleted = await send("DeleteMessageBatchCommand", {
    QueueUrl: q,
    Entries: [
      { Id: "one", ReceiptHandle: again.Messages[0].ReceiptHandle },
      { Id: "two", ReceiptHandle: byBody.two.ReceiptHandle },
      { Id: "bad", ReceiptHandle: "made-up" },
    ],
  });
  check(deleted.Successful.map((e) => e.Id).sort().join() === "one,two", JSON.stringify(deleted));
  check(deleted.Failed.map((e) => `${e.Id}:${e.Code}`).join() === "bad:ReceiptHandleIsInvalid", JSON.stringify(deleted.Failed));
  await refused("DeleteMessageCommand", { QueueUrl: q, ReceiptHandle: "made-up" }, "ReceiptHandleIsInvalid");
  const eleven = Array.from({ length: 11 }, (_, i) => ({ Id: String(i), MessageBody: "x" }));
  await refused("SendMessageBatchCommand", { QueueUrl: q, Entries: eleven }, "TooManyEntriesInBatchRequest");

  // sqs-consumer: 200 messages, one handler failure; every message processed once it succeeds, and deleted
  const total = 200;
  for (let start = 0; start < total; start += 10) {
    const entries = Array.from({ length: 10 }, (_, i) => ({ Id: String(i), MessageBody: `job-${start + i}` }));
    await send("SendMessageBatchCommand", { QueueUrl: q, Entries: entries });
  }
  await send("SetQueueAttributesCommand", { QueueUrl: q, Attributes: { VisibilityTimeout: "2" } });
  const attempts = {};
  const processed = new Set();
  let failedOnce = false;
  const errors = [];
  const consumer = Consumer.create({
    queueUrl: q,
    sqs,
    batchSize: 10,
    waitTimeSeconds: 1,
    handleMessageBatch: async (messages) => {
      const done = [];
      for (const m of messages) {
        attempts[m.Body] = (attempts[m.Body] || 0) + 1;
        if (m.Body === "job-7" && !failedOnce) {
          failedOnce = true; // left undeleted: back after its 2 s visibility timeout
          continue;
        }
        processed.add(m.Body);
        done.push(m);
      }
      return done;
    },
  });
  consumer.on("error", (err) => errors.push(`error: ${err.message}`));
  consumer.on("processing_error", (err) => errors.push(`processing_error: ${err.message}`));
  consumer.start();
  const until = Date.now() + 60_000;
  while (processed.size < total && Date.now() < until) await sleep(100);
  consumer.stop({ abort: false });
  await sleep(1500); // the last batch's delete
  check(!errors.length, errors.join("; "));
  check(processed.size === total, `processed ${processed.size} of ${total}`);
  const counts = (await send("GetQueueAttributesCommand", {
    QueueUrl: q,
    AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
  })).Attributes;
  check(counts.ApproximateNumberOfMessages === "0" && counts.ApproximateNumberOfMessagesNotVisible === "0", JSON.stringify(counts));

  // purge, delete
  await send("PurgeQueueCommand", { QueueUrl: q });
  await refused("PurgeQueueCommand", { QueueUrl: q }, "PurgeQueueInProgress");
  await send("DeleteQueueCommand", { QueueUrl: q });
  await send("DeleteQueueCommand", { QueueUrl: dlq });
  await refused("GetQueueUrlCommand", { QueueName: `${prefix}-q` }, "QueueDoesNotExist");
  const retried = Object.entries(attempts).filter(([, n]) => n > 1).map(([b, n]) => `${b}:${n}`);
  console.log(
    JSON.stringify({
      version: versionOf("@aws-sdk/client-sqs"),
      consumer_version: versionOf("sqs-consumer"),
      calls: [...calls].sort(),
      processed: processed.size,
      retried,
    }),
  );
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
