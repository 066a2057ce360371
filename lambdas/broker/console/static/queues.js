// The queues page: every queue the token sees with its figures, the backlog chart, create.

import { api, q } from "./api.js";
import { backlogChart, MAX_SERIES, record } from "./chart.js";
import { announce, clear, field, fmt, formError, h, poller, skippedRegions, table } from "./ui.js";

const PAGE = 100; // queues per page of the list API; the console shows the first page

export async function render(main) {
  const chartBox = h("div");
  const listBox = h("div");
  const regionNotice = h("p", { class: "notice warn", role: "status" });
  const refresh = async () => {
    const { queues, cursor } = await api.listQueues();
    const answers = await Promise.all(queues.map((queue) => api.metrics(queue.queue_name).catch((err) => err)));
    const failed = answers.filter((a) => a instanceof Error);
    if (queues.length && failed.length === queues.length) throw failed[0];
    skippedRegions(regionNotice, answers.flatMap((a) => (a instanceof Error ? [] : a.skipped_regions ?? [])));
    const figures = Object.fromEntries(
      queues.map((queue, i) => [queue.queue_name, answers[i] instanceof Error ? null : answers[i]]),
    );
    record(Object.fromEntries(Object.entries(figures).filter(([, m]) => m).map(([n, m]) => [n, m.backlog_count])));
    const byBacklog = Object.keys(figures).sort(
      (a, b) => (figures[b]?.backlog_count ?? -1) - (figures[a]?.backlog_count ?? -1) || a.localeCompare(b),
    );
    clear(chartBox).append(backlogChart(byBacklog, `Backlog, last 10 minutes (${Math.min(byBacklog.length, MAX_SERIES)} queues)`));
    const rows = queues.map((queue) => row(queue, figures[queue.queue_name], answers[queues.indexOf(queue)]));
    clear(listBox).append(
      table(
        `Queues (${queues.length}${cursor ? `, the first ${PAGE}` : ""})`,
        ["Queue", "Backlog", "In flight", "Delayed", "Oldest age", "Shards", "Paused", "Stream"],
        rows,
        { empty: "No queues yet: create one below." },
      ),
    );
  };
  const updates = poller(refresh);
  main.append(
    h("h1", {}, "Queues"),
    h("div", { class: "actions" }, updates.control),
    regionNotice,
    h("section", { "aria-label": "Backlog chart" }, chartBox),
    h("section", { "aria-label": "Queue list" }, listBox),
    createForm(refresh),
  );
  await refresh();
  updates.start();
  return updates.stop;
}

function row(queue, metrics, answer) {
  const name = queue.queue_name;
  const link = h("th", { scope: "row" }, h("a", { href: `#/queues/${q(name)}` }, name));
  const tail = h("a", { href: `#/streams/${q(name)}`, "aria-label": `Tail ${name}` }, "Tail");
  if (!metrics) {
    return [link, h("span", { class: "error" }, `unavailable: ${answer.message}`), "", "", "", queue.shard_count, queue.paused ? "yes" : "no", tail];
  }
  return [
    link,
    fmt.count(metrics.backlog_count),
    fmt.count(metrics.in_flight),
    fmt.count(metrics.delayed),
    fmt.age(metrics.oldest_message_age_ms),
    fmt.count(metrics.shard_count),
    metrics.paused ? "yes" : "no",
    tail,
  ];
}

function createForm(refresh) {
  const name = h("input", { name: "queue_name", required: true, autocomplete: "off" });
  const dlq = h("input", { name: "dead_letter_queue", autocomplete: "off" });
  const retries = h("input", { name: "max_retries", type: "number", min: 0, inputmode: "numeric" });
  const ordered = h("input", { name: "ordered", type: "checkbox" });
  const bottomless = h("input", { name: "bottomless", type: "checkbox" });
  const error = h("p", { class: "error", role: "alert" });
  const notice = h("p", { class: "notice", role: "status" });
  const form = h(
    "form",
    { "aria-labelledby": "create-title" },
    field("Name", name, "1–63 letters, digits, _ and -"),
    field("Dead letter queue (optional)", dlq),
    field("Max retries", retries),
    field("Ordered", ordered),
    field("Bottomless", bottomless),
    h("button", { type: "submit" }, "Create queue"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = notice.textContent = "";
    const settings = {};
    if (dlq.value.trim()) settings.dead_letter_queue = dlq.value.trim();
    if (retries.value !== "") settings.max_retries = Number(retries.value);
    if (ordered.checked) settings.ordered = true;
    if (bottomless.checked) settings.bottomless = true;
    try {
      const created = await api.createQueue(name.value.trim(), settings);
      form.reset();
      notice.replaceChildren("Created ", h("a", { href: `#/queues/${q(created.queue_name)}` }, created.queue_name), ".");
      announce(`Queue ${created.queue_name} created`);
      await refresh();
    } catch (err) {
      formError(error, err);
    }
  });
  return h("section", {}, h("h2", { id: "create-title" }, "Create a queue"), form, error, notice);
}
