// The console's only way to the server: the public API under /api/v1 on
// this origin, with the token (an API token or a JWT of the app's identity
// provider) kept in this tab's sessionStorage (never in a URL, never in a
// cookie).

const KEY = "chatd.token";

export const token = {
  get: () => sessionStorage.getItem(KEY) || "",
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

/** The claims of a JWT (null for an API token); read, never trusted: the server verifies. */
export function jwtClaims(t) {
  const parts = t.split(".");
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, "=")));
  } catch {
    return null;
  }
}

// Embedded in an application's page (an iframe), the console takes its JWT
// from the page, which knows the signed-in user: it asks with
// {type: "chatd-token-request"} when it has none and a minute before the
// one it has expires, and the page answers {type: "chatd-token", token}.
let renewal;

/** Listens for the embedding page's tokens; onFirst runs when the first arrives. */
export function tokensFromParent(onFirst) {
  if (window.parent === window) return;
  addEventListener("message", (e) => {
    if (e.source !== window.parent || e.data?.type !== "chatd-token" || typeof e.data.token !== "string") return;
    const first = token.get() === "";
    token.set(e.data.token);
    scheduleRenewal();
    if (first) onFirst();
  });
  if (token.get()) scheduleRenewal();
  else askParent();
}

function askParent() {
  window.parent.postMessage({ type: "chatd-token-request" }, "*");
}

function scheduleRenewal() {
  clearTimeout(renewal);
  const exp = jwtClaims(token.get())?.exp;
  if (typeof exp === "number") renewal = setTimeout(askParent, Math.max(0, exp * 1000 - Date.now() - 60_000));
}

/** An error answer of the API: its status, message and field errors. */
export class APIError extends Error {
  constructor(status, body) {
    super((body && body.message) || `The server answered ${status}.`);
    this.status = status;
    this.validations = (body && Array.isArray(body.validations)) ? body.validations : [];
  }
}

/** A random (version 4) UUID; crypto.randomUUID needs a secure context. */
export function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});

/**
 * Calls the API. Reads, and writes sent with an Idempotency-Key
 * (idempotent: true), are retried on 503 and dropped connections; a 401
 * signs the tab out (unless quiet401).
 * @param {string} method
 * @param {string} path under /api/v1
 * @param {unknown} [body]
 * @param {{idempotent?: boolean, signal?: AbortSignal, quiet401?: boolean}} [options]
 */
export async function api(method, path, body, { idempotent = false, signal, quiet401 = false } = {}) {
  const headers = { Authorization: "Bearer " + token.get() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (idempotent) headers["Idempotency-Key"] = uuid();
  const retryable = method === "GET" || idempotent;
  for (let attempt = 0; ; attempt++) {
    let r;
    try {
      r = await fetch("/api/v1" + path, { method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      if (signal?.aborted || !retryable || attempt >= 3) throw e;
      await sleep(250 * 2 ** attempt, signal);
      continue;
    }
    if (r.status === 503 && retryable && attempt < 3) {
      await sleep(250 * 2 ** attempt, signal);
      continue;
    }
    const data = await r.json().catch(() => null);
    if (r.ok) return data;
    if (r.status === 401 && !quiet401) signedOut();
    throw new APIError(r.status, data);
  }
}

function signedOut() {
  token.clear();
  dispatchEvent(new CustomEvent("chatd:signed-out"));
}

/**
 * Reads an SSE stream with fetch, so the Authorization header can be sent
 * (EventSource cannot): calls onEvent(name, data) per event until the
 * stream ends or signal aborts.
 */
async function readSSE(path, signal, onEvent) {
  const r = await fetch("/api/v1" + path, { headers: { Authorization: "Bearer " + token.get(), Accept: "text/event-stream" }, signal });
  if (!r.ok) {
    if (r.status === 401) signedOut();
    throw new APIError(r.status, await r.json().catch(() => null));
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", name = "message", data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
        name = "message";
        data = [];
      } else if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
  }
}

/**
 * Follows GET /chats/watch until signal aborts, reconnecting with backoff:
 * onChat(chat) per event, onState("live" | "reconnecting").
 */
export async function watchChats(signal, onChat, onState) {
  for (let retry = 0; !signal.aborted; retry++) {
    try {
      onState("live");
      await readSSE("/chats/watch", signal, (name, data) => { retry = 0; if (name === "chat") onChat(data); });
    } catch (e) {
      if (signal.aborted || (e instanceof APIError && e.status === 401)) return;
    }
    onState("reconnecting");
    await sleep(Math.min(5000, 250 * 2 ** retry), signal);
  }
}

const streamEvents = ["message", "message_part", "status", "queue", "action_required", "history_reset", "preview_reset", "structured_output_partial", "provider_retry"];

/**
 * Follows a chat's stream with EventSource and single-use stream tickets
 * (docs/api.md#browsers) until signal aborts. Every (re)connection starts
 * from the whole history, so edits made while disconnected are not missed:
 * onEvent("history_reset") comes first on a reconnection. onState reports
 * "live" (with the number of connections so far), "reconnecting" or "gone"
 * (the chat no longer exists).
 */
export function followChat(chat, signal, onEvent, onState) {
  let es = null, retry = 0, opened = 0;
  const reconnect = () => {
    es?.close();
    if (signal.aborted) return;
    onState("reconnecting");
    sleep(Math.min(5000, 250 * 2 ** retry++), signal).then(open);
  };
  const open = async () => {
    if (signal.aborted) return;
    let ticket;
    try {
      ({ ticket } = await api("POST", `/chats/${chat}/stream-ticket`, undefined, { signal }));
    } catch (e) {
      if (e instanceof APIError && e.status === 404) return onState("gone");
      if (e instanceof APIError && e.status === 401) return;
      return reconnect();
    }
    if (signal.aborted) return;
    es = new EventSource(`/api/v1/chats/${chat}/stream?ticket=${encodeURIComponent(ticket)}`);
    es.onopen = () => {
      retry = 0;
      if (opened++ > 0) onEvent("history_reset", {});
      onState("live", opened);
    };
    for (const name of streamEvents) es.addEventListener(name, (ev) => onEvent(name, JSON.parse(ev.data)));
    // The server's own `error` events carry data; EventSource's transport
    // errors do not (it would retry with the used ticket: open anew).
    es.addEventListener("error", (ev) => {
      const data = /** @type {MessageEvent} */ (ev).data;
      if (data) onEvent("error", JSON.parse(data));
      else reconnect();
    });
  };
  signal.addEventListener("abort", () => es?.close(), { once: true });
  open();
}
