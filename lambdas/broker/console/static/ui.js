// DOM helpers, formatting, the confirmation dialog and how an API error is put to the user.
// Every text goes in as a text node (never innerHTML), so message bodies cannot inject markup.

import { ApiError, signOut } from "./api.js";

let ids = 0;
export const uid = (prefix) => `${prefix}-${++ids}`;

// h("button", {type: "button", onclick: fn}, "Text", child...): attributes, properties for on* handlers.
export function h(tag, attrs = {}, ...children) {
  const svg = ["svg", "polyline", "line", "text", "g", "title", "desc"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const clear = (el) => {
  el.replaceChildren();
  return el;
};

// A labelled form control: <label for> the control, and a hint the control is described by.
export function field(text, control, hint) {
  if (!control.id) control.id = uid("field");
  const hintEl = hint ? h("span", { class: "hint", id: uid("hint") }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  const label = h("label", { for: control.id }, text);
  const inline = control.type === "checkbox";
  return h("div", { class: inline ? "field inline" : "field" }, inline ? [control, label] : [label, control], hintEl);
}

export function table(caption, headers, rows, { empty = "None." } = {}) {
  const head = h("tr", {}, headers.map((text) => h("th", { scope: "col", class: numeric(text) ? "num" : null }, text)));
  const body = rows.length
    ? rows.map((cells) => h("tr", {}, cells.map((cell, i) => cellFor(cell, headers[i]))))
    : [h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, empty))];
  return h("table", {}, h("caption", {}, caption), h("thead", {}, head), h("tbody", {}, body));
}

const NUMERIC = /^(Backlog|In flight|Delayed|Shards|Lag|Attempts|Next seq|Flushed seq|Shard|Bytes)/;
const numeric = (header) => NUMERIC.test(header);
const cellFor = (cell, header) =>
  cell && cell.nodeName === "TH" ? cell : h("td", { class: numeric(header) ? "num" : null }, cell);

export const fmt = {
  count: (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US")),
  age(ms) {
    if (ms === null || ms === undefined) return "–";
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  },
  time: (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC") : "–"),
  body(value, contentType) {
    if (contentType === "json") return JSON.stringify(value);
    return String(value);
  },
};

// A modal confirmation on <dialog>: focus moves into it, Escape cancels, focus returns afterwards.
export function confirmAction(title, text, verb, { danger = true } = {}) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const titleId = uid("dialog-title");
    const textId = uid("dialog-text");
    const dialog = h(
      "dialog",
      { "aria-labelledby": titleId, "aria-describedby": textId },
      h("h2", { id: titleId }, title),
      h("p", { id: textId }, text),
      h(
        "form",
        { method: "dialog", class: "actions" },
        h("button", { value: "cancel", class: "secondary", autofocus: true }, "Cancel"),
        h("button", { value: "confirm", class: danger ? "danger" : null }, verb),
      ),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === "confirm");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// Turns an API error into sentences the user can act on. `onSignIn` re-opens the sign-in page.
export function explain(err) {
  if (!(err instanceof ApiError)) return { lines: [`The console failed: ${err.message || err}`] };
  const code = err.code ? ` (error ${err.code})` : "";
  const retry = err.retryAfter ? ` Try again in ${err.retryAfter} s.` : " Try again shortly.";
  switch (err.status) {
    case 0:
      return { lines: [`The API could not be reached: ${err.message}.`, "Check the network and try again."], retry: true };
    case 401:
      return {
        lines: [
          `The API did not accept this token: ${err.message}${code}.`,
          "It may be mistyped, revoked or expired. Sign in again with a valid token.",
        ],
        signIn: true,
      };
    case 403:
      return {
        lines: [
          `This token is not allowed to do that: ${err.message}${code}.`,
          "A token bound to another queue, or without this scope, sees nothing here. Sign in with a token that has it.",
        ],
        signIn: true,
      };
    case 429:
      return { lines: [`The API is throttling requests: ${err.message}${code}.${retry}`], retry: true };
    case 502:
    case 503:
    case 504:
      return {
        lines: [
          `The service is unavailable: ${err.message}${code}.`,
          `A region or a dependency of this API is down or unreachable; nothing was changed.${retry}`,
        ],
        retry: true,
      };
    default:
      if (err.status >= 500) return { lines: [`The API failed: ${err.message}${code}. This is a bug in Sluice.`] };
      return { lines: [`${err.message}${code}`] };
  }
}

// The page-wide alert: the explanation, and the buttons that act on it.
export function showAlert(err, { retry } = {}) {
  const alertEl = document.getElementById("alert");
  const { lines, signIn, retry: canRetry } = explain(err);
  clear(alertEl).append(
    ...lines.map((line) => h("p", {}, line)),
    h(
      "div",
      { class: "actions" },
      signIn && h("button", { type: "button", onclick: () => { signOut(); location.hash = "#/signin"; } }, "Sign in again"),
      canRetry && retry && h("button", { type: "button", class: "secondary", onclick: retry }, "Retry"),
    ),
  );
}

export const clearAlert = () => clear(document.getElementById("alert"));

// The figures of a queue whose other regions cannot all be reached come from those that answered
// (`skipped_regions`, docs/api.md): say so next to them rather than failing the page.
export function skippedRegions(el, regions) {
  const names = [...new Set(regions)].sort();
  el.textContent = names.length
    ? `Region ${names.join(", ")} cannot be reached: these figures count the regions that answered.`
    : "";
}

// Shows an error next to the form that caused it (bad input: the API's own text), and announces it.
export function formError(el, err) {
  if (err instanceof ApiError && ([0, 401, 403, 429].includes(err.status) || err.status >= 500)) {
    showAlert(err);
    el.textContent = explain(err).lines[0];
  } else {
    el.textContent = explain(err).lines.join(" ");
  }
}

export function announce(text) {
  const status = document.getElementById("status");
  status.textContent = "";
  setTimeout(() => (status.textContent = text), 50);
}

// Pages that refresh on their own share one interval, chosen by the user and kept for this tab.
const REFRESH_KEY = "sluice.console.refresh";
const REFRESH_CHOICES = [
  [1000, "1 s"],
  [5000, "5 s"],
  [15000, "15 s"],
  [60000, "1 min"],
  [0, "Off"],
];
const refreshMs = () => Number(sessionStorage.getItem(REFRESH_KEY) ?? 5000);

// Runs `task` now and then every refresh interval until the returned `stop` is called; a task that
// fails shows the alert and keeps being retried at the interval (a region that comes back clears it).
export function poller(task) {
  let timer = null;
  let stopped = false;
  let failing = false;
  const run = async () => {
    try {
      await task();
      if (failing) clearAlert();
      failing = false;
    } catch (err) {
      if (stopped) return;
      failing = true;
      showAlert(err, { retry: run });
    }
    schedule();
  };
  const schedule = () => {
    clearTimeout(timer);
    if (!stopped && refreshMs() > 0) timer = setTimeout(run, refreshMs());
  };
  const select = h(
    "select",
    { name: "refresh", onchange: () => { sessionStorage.setItem(REFRESH_KEY, select.value); schedule(); } },
    REFRESH_CHOICES.map(([ms, text]) => h("option", { value: ms, selected: ms === refreshMs() }, text)),
  );
  return {
    control: field("Refresh every", select),
    start: run,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
