// A stream: a live tail of a queue's records (lease-free reads), from the beginning, from now, from an
// offset or from a time, with every record's offset and the offset to resume from.

import { api, q } from "./api.js";
import { clear, field, fmt, formError, h, showAlert, clearAlert } from "./ui.js";

const WAIT_SECONDS = 5; // long-poll per read: a record shows up as soon as it is written
const KEEP_ROWS = 500; // the newest records on the page

export async function render(main, name) {
  await api.queue(name); // a 403 or 404 becomes the page's message, before any form is drawn
  const from = h("select", { name: "from" },
    h("option", { value: "beginning" }, "the beginning"),
    h("option", { value: "now" }, "now"),
    h("option", { value: "offset" }, "an offset"),
    h("option", { value: "time" }, "a time"));
  const offset = h("input", { name: "offset", autocomplete: "off", class: "mono", size: 36 });
  const time = h("input", { name: "time", type: "datetime-local", step: 1 });
  const start = h("button", { type: "submit" }, "Start tail");
  const stop = h("button", { type: "button", class: "secondary", disabled: true }, "Stop");
  const error = h("p", { class: "error", role: "alert" });
  const state = h("p", { role: "status", id: "tail-state" }, "Stopped.");
  const resume = h("output", { class: "mono", id: "next-offset" }, "–");
  const body = h("tbody");
  const form = h("form", { "aria-label": "Tail" },
    field("Start from", from),
    field("Offset (after this one)", offset, "32 digits, or a cursor (~…) the tail showed"),
    field("Time (UTC)", time),
    start, stop);
  let controller = null;
  let shown = 0;

  const position = () => {
    switch (from.value) {
      case "beginning": return { offset: "-" };
      case "now": return { start: Date.now() };
      case "offset": return { offset: offset.value.trim() };
      default: return { start: time.value ? Date.parse(`${time.value}Z`) : "" };
    }
  };

  const tail = async (signal) => {
    let query = position();
    while (!signal.aborted) {
      let page;
      try {
        page = await api.records(name, { ...query, limit: 100, timeout_sec: WAIT_SECONDS }, signal);
      } catch (err) {
        if (signal.aborted) return;
        if (err.status >= 400 && err.status < 500 && err.status !== 429) {
          formError(error, err); // a bad offset or time: the API's own words
          halt("Stopped.");
          return;
        }
        showAlert(err); // a region down, throttling: keep the position and try again
        state.textContent = `Waiting to retry from ${query.offset || "the start position"}…`;
        await new Promise((r) => setTimeout(r, 2000));
        continue;
      }
      clearAlert();
      for (const record of page.records) append(record);
      if (page.next_offset) {
        query = { offset: page.next_offset };
        resume.textContent = page.next_offset;
      }
      state.textContent = `Tailing: ${shown} record(s) so far.`;
    }
  };

  const append = (record) => {
    shown += 1;
    body.append(h("tr", {},
      h("th", { scope: "row", class: "mono" }, record.offset),
      h("td", { class: "num" }, String(record.shard)),
      h("td", {}, record.region || ""),
      h("td", {}, fmt.time(record.timestamp_ms)),
      h("td", { class: "mono" }, record.id),
      h("td", {}, h("pre", {}, fmt.body(record.body, record.content_type)))));
    while (body.rows.length > KEEP_ROWS) body.deleteRow(0);
  };

  const halt = (text) => {
    if (controller) controller.abort();
    controller = null;
    start.disabled = false;
    stop.disabled = true;
    state.textContent = text;
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    error.textContent = "";
    halt("Starting…");
    clear(body);
    shown = 0;
    controller = new AbortController();
    start.disabled = true;
    stop.disabled = false;
    state.textContent = "Tailing…";
    tail(controller.signal);
  });
  stop.addEventListener("click", () => {
    halt(`Stopped. Resume from offset ${resume.textContent} to read on.`);
    from.value = "offset";
    if (resume.textContent !== "–") offset.value = resume.textContent;
    start.focus();
  });

  main.append(
    h("h1", {}, `Stream ${name}`),
    h("p", {}, "Records in order, without leases: a tail reads, it never consumes. ",
      h("a", { href: `#/queues/${q(name)}` }, `Back to ${name}`)),
    form,
    error,
    state,
    h("p", {}, "Next offset (resume from it): ", resume),
    h("table", {},
      h("caption", {}, "Records"),
      h("thead", {}, h("tr", {}, ["Offset", "Shard", "Region", "Time", "Message", "Body"].map((t) => h("th", { scope: "col" }, t)))),
      body),
  );
  return () => halt("Stopped.");
}
