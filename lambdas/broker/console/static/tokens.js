// Tokens (admin): mint a token bound to a queue with its scopes, shown once; list and revoke.

import { api } from "./api.js";
import { announce, clear, confirmAction, field, fmt, formError, h, table } from "./ui.js";

export async function render(main) {
  const listBox = h("div");
  const listError = h("p", { class: "error", role: "alert" });
  const refresh = async () => {
    const tokens = await api.tokens();
    clear(listBox).append(
      table(
        `Tokens (${tokens.length}): secrets are never shown again`,
        ["Token id", "Queue", "Scopes", "Created", "Expires", "Action"],
        tokens.map((t) => [
          h("th", { scope: "row", class: "mono" }, t.token_id),
          t.queue,
          t.scopes.join(", "),
          fmt.time(t.created_on),
          t.expires_on ? fmt.time(t.expires_on) : "never",
          h("button", { type: "button", class: "danger", "aria-label": `Revoke token ${t.token_id}`,
            onclick: () => revoke(t) }, "Revoke"),
        ]),
      ),
    );
  };
  const revoke = async (t) => {
    listError.textContent = "";
    const sure = await confirmAction(`Revoke token ${t.token_id}?`,
      `Clients using it (queue ${t.queue}: ${t.scopes.join(", ")}) are refused within 30 s.`, "Revoke");
    if (!sure) return;
    try {
      await api.revokeToken(t.token_id);
      announce(`Token ${t.token_id} revoked`);
      await refresh();
    } catch (err) {
      formError(listError, err);
    }
  };
  await refresh(); // a token without admin gets the API's 403 as the page's message
  main.append(h("h1", {}, "Tokens"), mintForm(refresh), h("h2", {}, "Existing tokens"), listError, listBox);
}

function mintForm(refresh) {
  const queue = h("input", { name: "queue", value: "*", required: true, autocomplete: "off" });
  const scopes = ["read", "write", "admin"].map((scope) =>
    h("input", { type: "checkbox", name: "scopes", value: scope, checked: scope === "read" }));
  const expires = h("input", { name: "expires_in_seconds", type: "number", min: 1, inputmode: "numeric" });
  const error = h("p", { class: "error", role: "alert" });
  const once = h("div");
  const form = h(
    "form",
    { "aria-labelledby": "mint-title" },
    field("Queue", queue, "a queue name, or * for every queue"),
    h("fieldset", {}, h("legend", {}, "Scopes"), scopes.map((box) => field(box.value, box))),
    field("Expires after (s, optional)", expires),
    h("button", { type: "submit" }, "Mint token"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    clear(once);
    const body = { queue: queue.value.trim(), scopes: scopes.filter((b) => b.checked).map((b) => b.value) };
    if (expires.value !== "") body.expires_in_seconds = Number(expires.value);
    try {
      const minted = await api.mintToken(body);
      const secret = h("output", { id: "minted-token", "aria-label": "The new token" }, minted.token);
      const copy = h("button", { type: "button", class: "secondary", onclick: async () => {
        try {
          await navigator.clipboard.writeText(minted.token);
          copy.textContent = "Copied";
        } catch {
          copy.textContent = "Select the token and copy it";
        }
      } }, "Copy");
      once.append(h("div", { class: "token-once" },
        h("p", {}, `Token ${minted.token_id} for ${minted.queue} (${minted.scopes.join(", ")}). `,
          h("strong", {}, "It is shown once: copy it now.")),
        secret, copy));
      announce("Token minted: it is shown once");
      copy.focus();
      await refresh();
    } catch (err) {
      formError(error, err);
    }
  });
  return h("section", {}, h("h2", { id: "mint-title" }, "Mint a token"), form, error, once);
}
