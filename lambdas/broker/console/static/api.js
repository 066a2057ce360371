// The native API, as any client calls it: a bearer token, the JSON envelope, the API's own error text.
// The token lives in this tab's sessionStorage only: closing the tab forgets it.

const TOKEN_KEY = "sluice.console.token";
// The API root is where the console is served from, one level up: /console/api.js -> /
export const API_ROOT = new URL("..", import.meta.url);

export class ApiError extends Error {
  constructor(status, code, message, retryAfter = null) {
    super(message);
    this.status = status; // 0: the API could not be reached at all
    this.code = code; // the stable error code of docs/api.md, when the API sent one
    this.retryAfter = retryAfter;
  }
}

export const token = () => sessionStorage.getItem(TOKEN_KEY);
export const signIn = (value) => sessionStorage.setItem(TOKEN_KEY, value.trim());
export const signOut = () => sessionStorage.removeItem(TOKEN_KEY);

export const q = (name) => encodeURIComponent(name);

export async function call(method, path, body, { signal, query } = {}) {
  const url = new URL(path.replace(/^\//, ""), API_ROOT);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Authorization: `Bearer ${token() || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, null, `the API at ${API_ROOT.origin} could not be reached (${err.message})`);
  }
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    payload = null; // a gateway's HTML or an empty body: the status says what happened
  }
  if (!response.ok || (payload && payload.success === false)) {
    const first = payload && Array.isArray(payload.errors) ? payload.errors[0] : null;
    const message = first?.message || payload?.message || response.statusText || `HTTP ${response.status}`;
    throw new ApiError(response.status, first?.code ?? null, message, response.headers.get("Retry-After"));
  }
  return payload ? payload.result : null;
}

export const api = {
  listQueues: (cursor) => call("GET", "/v1/queues", undefined, { query: { limit: 100, cursor } }),
  queue: (name) => call("GET", `/v1/queues/${q(name)}`),
  createQueue: (queue_name, settings) => call("POST", "/v1/queues", { queue_name, settings }),
  updateQueue: (name, settings) => call("PATCH", `/v1/queues/${q(name)}`, { settings }),
  deleteQueue: (name) => call("DELETE", `/v1/queues/${q(name)}`),
  metrics: (name, options) => call("GET", `/v1/queues/${q(name)}/metrics`, undefined, options),
  shards: (name) => call("GET", `/v1/queues/${q(name)}/shards`),
  groups: (name) => call("GET", `/v1/queues/${q(name)}/consumer-groups`),
  send: (name, message) => call("POST", `/v1/queues/${q(name)}/messages`, { messages: [message] }),
  peek: (name, body) => call("POST", `/v1/queues/${q(name)}/messages/peek`, body),
  purge: (name) => call("POST", `/v1/queues/${q(name)}/purge`),
  pause: (name) => call("POST", `/v1/queues/${q(name)}/pause`),
  resume: (name) => call("POST", `/v1/queues/${q(name)}/resume`),
  redrive: (name, from) => call("POST", `/v1/queues/${q(name)}/redrive`, { from }),
  records: (name, query, signal) =>
    call("GET", `/v1/queues/${q(name)}/records`, undefined, { query, signal }),
  tokens: () => call("GET", "/v1/tokens"),
  mintToken: (body) => call("POST", "/v1/tokens", body),
  revokeToken: (id) => call("DELETE", `/v1/tokens/${q(id)}`),
};
