// One queue: its figures and chart, operations (each confirmed), a test send, peek, consumer groups
// with their lag, shards, the dead letter queue (peek, redrive) and its settings, editable.

import { api, q } from "./api.js";
import { backlogChart, record } from "./chart.js";
import { announce, clear, confirmAction, field, fmt, formError, h, poller, skippedRegions, table, uid } from "./ui.js";

// Settings as the API names them (docs/api.md "Queues"), with the control that edits each.
const SETTINGS = [
  ["retention_seconds", "number", "Retention (s)"],
  ["bottomless", "checkbox", "Bottomless (keep S3 segments forever)"],
  ["delivery_delay_seconds", "number", "Delivery delay (s)"],
  ["visibility_timeout_ms", "number", "Visibility timeout (ms)"],
  ["max_retries", "number", "Max retries"],
  ["retry_delay_seconds", "number", "Retry delay (s)"],
  ["dead_letter_queue", "text", "Dead letter queue"],
  ["ordered", "checkbox", "Ordered"],
  ["min_shards", "number", "Min shards"],
  ["max_shards", "number", "Max shards"],
  ["max_message_bytes", "number", "Max message bytes"],
];

export async function render(main, name) {
  let queue = await api.queue(name);
  const heading = h("h1", {});
  const figuresBox = h("div");
  const chartBox = h("div");
  const actionsBox = h("div", { class: "actions" });
  const groupsBox = h("div");
  const shardsBox = h("div");
  const dlqBox = h("div");
  const opsNotice = h("p", { class: "notice", role: "status" });
  const regionNotice = h("p", { class: "notice warn", role: "status" });
  const opsError = h("p", { class: "error", role: "alert" });
  let groupNames = ["default"];

  const drawHeading = () =>
    clear(heading).append(
      ...[
        queue.queue_name,
        queue.paused && h("span", { class: "badge paused" }, "paused"),
        queue.settings.ordered && h("span", { class: "badge" }, "ordered"),
        queue.settings.bottomless && h("span", { class: "badge" }, "bottomless"),
      ].filter(Boolean),
    );

  const operation = async (title, text, verb, run, done) => {
    opsNotice.textContent = opsError.textContent = "";
    if (!(await confirmAction(title, text, verb))) return;
    try {
      const result = await run();
      opsNotice.textContent = done(result);
      announce(opsNotice.textContent);
      queue = await api.queue(name);
      drawHeading();
      drawActions();
      await refresh();
    } catch (err) {
      formError(opsError, err);
    }
  };

  const drawActions = () =>
    clear(actionsBox).append(
      queue.paused
        ? h("button", { type: "button", onclick: () => operation(`Resume ${name}?`, "Pulls deliver messages again.", "Resume",
            () => api.resume(name), () => `${name} resumed.`) }, "Resume")
        : h("button", { type: "button", class: "secondary", onclick: () => operation(`Pause ${name}?`,
            "Sends are still accepted; pulls answer 409 until the queue is resumed.", "Pause",
            () => api.pause(name), () => `${name} paused.`) }, "Pause"),
      h("button", { type: "button", class: "danger", onclick: () => operation(`Purge ${name}?`,
        "Every message sent before now is removed for every consumer group: unread, in flight, delayed. This cannot be undone.",
        "Purge", () => api.purge(name), (r) => `Purged ${r.shards_purged} shard(s).`) }, "Purge"),
      h("button", { type: "button", class: "danger", onclick: async () => {
        opsError.textContent = "";
        if (!(await confirmAction(`Delete ${name}?`, "The queue and its messages are deleted. This cannot be undone.", "Delete queue"))) return;
        try {
          await api.deleteQueue(name);
          announce(`Queue ${name} deleted`);
          location.hash = "#/queues";
        } catch (err) {
          formError(opsError, err);
        }
      } }, "Delete queue"),
      h("a", { href: `#/streams/${q(name)}` }, "Tail the stream"),
    );

  const refresh = async () => {
    const [metrics, shards, groups] = await Promise.all([api.metrics(name), api.shards(name), api.groups(name)]);
    record({ [name]: metrics.backlog_count });
    groupNames = groups.consumer_groups.map((g) => g.name);
    skippedRegions(regionNotice, metrics.skipped_regions ?? []);
    clear(figuresBox).append(regionNotice, figures(metrics));
    if (metrics.regions) figuresBox.append(regionTable(metrics.regions));
    clear(chartBox).append(backlogChart([name], `Backlog of ${name}, last 10 minutes`));
    clear(groupsBox).append(groupTable(groups.consumer_groups, metrics.consumer_groups));
    clear(shardsBox).append(shardTable(shards.shards));
    await drawDlq();
  };

  const dlqFigures = h("div");
  const dlqPeek = h("div");
  const dlqNotice = h("p", { class: "notice", role: "status" });
  const dlqError = h("p", { class: "error", role: "alert" });
  const drawDlq = async () => {
    const dlq = queue.settings.dead_letter_queue;
    if (!dlq) {
      clear(dlqBox).append(h("p", {}, "No dead letter queue: set one in the settings below."));
      return;
    }
    if (!dlqBox.contains(dlqFigures)) {
      clear(dlqBox).append(
        h("p", {}, "Messages that failed ", String(queue.settings.max_retries), " retries go to ",
          h("a", { href: `#/queues/${q(dlq)}` }, dlq), "."),
        dlqFigures,
        h("div", { class: "actions" },
          h("button", { type: "button", class: "secondary", onclick: () => peekInto(dlq, dlqPeek, dlqError, 10) }, "Peek dead letters"),
          h("button", { type: "button", onclick: async () => {
            dlqNotice.textContent = dlqError.textContent = "";
            if (!(await confirmAction(`Redrive ${dlq}?`, `Its messages are sent to ${name} again as new messages (attempts start at 1) and removed from ${dlq}.`, "Redrive", { danger: false }))) return;
            try {
              const moved = await api.redrive(name, dlq);
              dlqNotice.textContent = `Moved ${moved.moved} message(s) from ${dlq} to ${name}; ${moved.remaining_in_source} remain.`;
              announce(dlqNotice.textContent);
              clear(dlqPeek);
              await refresh();
            } catch (err) {
              formError(dlqError, err);
            }
          } }, "Redrive to this queue")),
        dlqNotice,
        dlqError,
        dlqPeek,
      );
    }
    try {
      const m = await api.metrics(dlq);
      clear(dlqFigures).append(h("p", { id: "dlq-backlog" }, `${fmt.count(m.backlog_count)} dead letter(s) waiting in ${dlq}.`));
    } catch (err) {
      clear(dlqFigures).append(h("p", { class: "error" }, `${dlq}: ${err.message}`));
    }
  };

  drawHeading();
  drawActions();
  const updates = poller(refresh);
  main.append(
    heading,
    h("div", { class: "actions" }, updates.control),
    section("Now", figuresBox, chartBox),
    section("Operations", actionsBox, opsNotice, opsError),
    section("Send a test message", sendForm(name, () => refresh())),
    section("Peek", peekForm(name, () => groupNames)),
    section("Consumer groups", groupsBox),
    section("Shards", shardsBox),
    section("Dead letters", dlqBox),
    section("Settings", settingsForm(name, () => queue, async (updated) => {
      queue = updated;
      drawHeading();
      clear(dlqBox);
      await refresh();
    })),
  );
  await refresh();
  updates.start();
  return updates.stop;
}

function section(title, ...children) {
  const id = uid("section");
  return h("section", { "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

function figures(m) {
  const item = (label, value, id) => h("div", {}, h("dt", {}, label), h("dd", { id }, value));
  return h(
    "dl",
    { class: "figures" },
    item("Backlog", fmt.count(m.backlog_count), "figure-backlog"),
    item("In flight", fmt.count(m.in_flight), "figure-in-flight"),
    item("Delayed", fmt.count(m.delayed), "figure-delayed"),
    item("Oldest age", fmt.age(m.oldest_message_age_ms), "figure-oldest"),
    item("Backlog bytes", fmt.count(m.backlog_bytes), "figure-bytes"),
    item("Shards", fmt.count(m.shard_count), "figure-shards"),
  );
}

function groupTable(groups, figures) {
  const rows = groups.map((g) => {
    const f = figures[g.name] || {};
    return [
      h("th", { scope: "row" }, g.name),
      g.start_ms ? fmt.time(g.start_ms) : "earliest",
      fmt.count(f.backlog_count),
      fmt.count(f.in_flight),
      fmt.count(f.delayed),
      fmt.age(f.oldest_message_age_ms),
    ];
  });
  return table("Consumer groups: the lag is each group's backlog", ["Group", "Start", "Lag", "In flight", "Delayed", "Oldest age"], rows);
}

function shardTable(shards) {
  const rows = shards.map((s) => [
    h("th", { scope: "row", class: "num" }, String(s.shard)),
    s.unreachable ? "unreachable" : s.state,
    s.region || "home",
    h("span", { class: "mono" }, s.first_offset || "–"),
    h("span", { class: "mono" }, s.last_offset || "–"),
    fmt.count(s.next_seq),
    fmt.count(s.flushed_seq),
    [...s.parents, ...s.children.map((c) => `→${c}`)].join(" ") || "–",
  ]);
  return table(
    "Shards: open, sealed and retired; flushed seq is how far S3 holds the stream",
    ["Shard", "State", "Region", "First offset", "Last offset", "Next seq", "Flushed seq", "Lineage"],
    rows,
  );
}

function regionTable(regions) {
  const rows = Object.entries(regions).map(([region, f]) => [
    h("th", { scope: "row" }, region),
    fmt.count(f.backlog_count),
    fmt.count(f.in_flight),
    fmt.count(f.delayed),
  ]);
  return table("Backlog per region", ["Region", "Backlog", "In flight", "Delayed"], rows);
}

function sendForm(name, sent) {
  const body = h("textarea", { name: "body", rows: 3, required: true }, '{"hello": "sluice"}');
  const type = h("select", { name: "content_type" }, h("option", { value: "json" }, "json"), h("option", { value: "text" }, "text"));
  const key = h("input", { name: "partition_key", autocomplete: "off" });
  const delay = h("input", { name: "delay_seconds", type: "number", min: 0, inputmode: "numeric" });
  const error = h("p", { class: "error", role: "alert" });
  const notice = h("p", { class: "notice", role: "status" });
  const form = h(
    "form",
    { "aria-label": "Send a test message" },
    field("Body", body),
    field("Content type", type),
    field("Partition key (optional)", key),
    field("Delay (s)", delay),
    h("button", { type: "submit" }, "Send"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = notice.textContent = "";
    const message = { content_type: type.value };
    if (type.value === "json") {
      try {
        message.body = JSON.parse(body.value);
      } catch (err) {
        error.textContent = `The body is not JSON (${err.message}): pick the text content type to send it as it is.`;
        return;
      }
    } else {
      message.body = body.value;
    }
    if (key.value) message.partition_key = key.value;
    if (delay.value !== "") message.delay_seconds = Number(delay.value);
    try {
      const result = await api.send(name, message);
      notice.textContent = `Sent message ${result.message_ids[0]} at offset ${result.offsets[0]}.`;
      announce(notice.textContent);
      await sent();
    } catch (err) {
      formError(error, err);
    }
  });
  return [form, error, notice];
}

function peekForm(name, groups) {
  const group = h("input", { name: "consumer_group", value: "default", list: "peek-groups", autocomplete: "off" });
  const options = h("datalist", { id: "peek-groups" });
  const size = h("input", { name: "batch_size", type: "number", min: 1, max: 100, value: 10, inputmode: "numeric" });
  const out = h("div");
  const error = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    { "aria-label": "Peek" },
    field("Consumer group", group),
    options,
    field("Messages", size),
    h("button", { type: "submit", class: "secondary" }, "Peek"),
  );
  group.addEventListener("focus", () => clear(options).append(groups().map((g) => h("option", { value: g }))));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    peekInto(name, out, error, Number(size.value), group.value);
  });
  return [h("p", { class: "muted" }, "Unacked messages, without leasing them or counting a delivery."), form, error, out];
}

async function peekInto(name, out, error, size, group = "default") {
  error.textContent = "";
  try {
    const { messages } = await api.peek(name, { batch_size: size, consumer_group: group });
    const rows = messages.map((m) => [
      h("th", { scope: "row", class: "mono" }, m.id),
      fmt.time(m.timestamp_ms),
      String(m.attempts),
      m.content_type,
      h("pre", {}, fmt.body(m.body, m.content_type)),
    ]);
    clear(out).append(table(`Peeked in ${name} (${messages.length})`, ["Message", "Sent", "Attempts", "Type", "Body"], rows,
      { empty: "Nothing waiting." }));
  } catch (err) {
    formError(error, err);
  }
}

function settingsForm(name, current, saved) {
  const controls = {};
  const error = h("p", { class: "error", role: "alert" });
  const notice = h("p", { class: "notice", role: "status" });
  const fill = () => {
    for (const [key, kind] of SETTINGS) {
      const value = current().settings[key];
      if (kind === "checkbox") controls[key].checked = Boolean(value);
      else controls[key].value = value ?? "";
    }
  };
  const form = h(
    "form",
    { "aria-label": "Settings" },
    SETTINGS.map(([key, kind, label]) => {
      controls[key] = h("input", { name: key, type: kind, autocomplete: "off", inputmode: kind === "number" ? "numeric" : null });
      return field(label, controls[key]);
    }),
    h("button", { type: "submit" }, "Save settings"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = notice.textContent = "";
    const changed = {};
    for (const [key, kind] of SETTINGS) {
      const before = current().settings[key];
      let value;
      if (kind === "checkbox") value = controls[key].checked;
      else if (kind === "number") value = controls[key].value === "" ? null : Number(controls[key].value);
      else value = controls[key].value.trim() || null;
      if (value !== (before ?? null)) changed[key] = value;
    }
    if (!Object.keys(changed).length) {
      notice.textContent = "Nothing changed.";
      return;
    }
    try {
      const updated = await api.updateQueue(name, changed);
      notice.textContent = `Saved: ${Object.keys(changed).join(", ")}.`;
      announce(notice.textContent);
      await saved(updated);
      fill();
    } catch (err) {
      formError(error, err);
    }
  });
  fill();
  return [form, error, notice];
}
