// The console's entry point: sign-in, the hash router (#/queues, #/queues/<name>, #/streams/<name>,
// #/tokens), the page frame, and one place where a page's failure becomes a message, never a blank page.

import { API_ROOT, api, signIn, signOut, token } from "./api.js";
import { render as queuePage } from "./queue.js";
import { render as queuesPage } from "./queues.js";
import { render as streamPage } from "./stream.js";
import { render as tokensPage } from "./tokens.js";
import { clear, clearAlert, explain, field, h, showAlert } from "./ui.js";

const ROUTES = [
  [/^#\/queues$/, "queues", queuesPage],
  [/^#\/queues\/([^/]+)$/, "queues", queuePage],
  [/^#\/streams\/([^/]+)$/, "queues", streamPage],
  [/^#\/tokens$/, "tokens", tokensPage],
];

let cleanup = null; // stops the current page's timers and tails
let generation = 0; // a page whose render finishes after the next navigation is discarded
let next = "#/queues"; // where sign-in leads: the page asked for before it
let routed = false; // the first page of a load leaves focus where the browser put it

function signInPage(main) {
  const input = h("input", { type: "password", name: "token", id: "token", autocomplete: "off", required: true });
  const error = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    { class: "stack", "aria-labelledby": "signin-title" },
    field("Sluice token", input, "An admin token, or a token bound to one queue. Kept in this tab only (sessionStorage)."),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
    error,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    signIn(input.value);
    try {
      await api.listQueues();
    } catch (err) {
      if (err.status === 401) {
        signOut();
        error.textContent = explain(err).lines.join(" ");
        input.focus();
        return;
      }
      // 403 and the rest: the token is valid; the page it opens explains what it may not do.
    }
    location.hash = next;
  });
  main.append(
    h("section", { class: "signin" }, h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in to Sluice"),
      h("p", {}, `API: ${API_ROOT.href}`), form),
  );
  input.focus();
}

async function route() {
  const mine = ++generation;
  const moveFocus = routed;
  routed = true;
  if (cleanup) cleanup();
  cleanup = null;
  clearAlert();
  const main = clear(document.getElementById("main"));
  const hash = location.hash || "#/queues";
  document.getElementById("who").hidden = !token();
  if (!token() || hash === "#/signin") {
    if (hash !== "#/signin") {
      next = hash;
      history.replaceState(null, "", "#/signin");
    }
    document.title = "Sign in · Sluice console";
    markNav(null);
    signInPage(main);
    return;
  }
  const found = ROUTES.map(([re, nav, page]) => [hash.match(re), nav, page]).find(([m]) => m);
  if (!found) {
    location.hash = "#/queues";
    return;
  }
  const [match, nav, page] = found;
  markNav(nav);
  const params = match.slice(1).map(decodeURIComponent);
  try {
    const done = await page(main, ...params);
    if (mine !== generation) {
      if (typeof done === "function") done();
      return;
    }
    cleanup = typeof done === "function" ? done : null;
  } catch (err) {
    if (mine !== generation) return;
    showAlert(err, { retry: route });
    clear(main).append(
      h("h1", {}, "This page could not be shown"),
      h("p", {}, "The message above says why. ", h("a", { href: "#/queues" }, "Back to the queues"), "."),
    );
  }
  const title = main.querySelector("h1");
  document.title = `${title ? title.textContent : "Sluice"} · Sluice console`;
  if (title) {
    title.setAttribute("tabindex", "-1");
    // After a page change, focus moves to its heading (a screen reader reads where it landed); on the
    // first load it stays at the top, where Tab reaches the skip link first.
    if (moveFocus && !main.contains(document.activeElement)) title.focus();
  }
}

function markNav(page) {
  for (const link of document.querySelectorAll("header nav a")) {
    if (link.dataset.page === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#/")) route();
});
document.getElementById("skip").addEventListener("click", (event) => {
  event.preventDefault(); // the hash is the router's: move focus instead
  document.getElementById("main").focus();
});
document.getElementById("sign-out").addEventListener("click", () => {
  signOut();
  location.hash = "#/signin";
});
document.getElementById("api-host").textContent = API_ROOT.host;
route();
