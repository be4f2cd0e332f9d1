// What the tests share: the chatd the Go driver (internal/jstest) started
// (CHATD_URL, CHATD_TOKEN) and its test kit (CHATD_TESTKIT), which answers
// what the database holds.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { ChatdClient } from "@chatd/client";

export const baseURL = process.env["CHATD_URL"] ?? "";
export const token = process.env["CHATD_TOKEN"] ?? "";
const testkit = process.env["CHATD_TESTKIT"] ?? "";
assert.ok(baseURL && token && testkit, "CHATD_URL, CHATD_TOKEN and CHATD_TESTKIT must be set (run through go test ./internal/jstest)");

export const client = new ChatdClient({ baseUrl: baseURL, token });

/** A marker unique to one test, to find its chats in the database. */
export const marker = (what: string) => `${what} #${randomUUID()}`;

export interface DBChat {
  id: string;
  /** The texts of its user messages, in order. */
  users: string[];
  /** How many structured requests it holds. */
  requests: number;
}

/** The chats whose user messages contain the marker, counted in SQL. */
export async function chatsWith(m: string): Promise<DBChat[]> {
  const r = await fetch(`${testkit}/chats?marker=${encodeURIComponent(m)}`);
  assert.equal(r.status, 200, await r.clone().text());
  return ((await r.json()) as { chats: DBChat[] }).chats;
}

/** Waits, on its stream, until the chat is idle (its turn over). */
export async function idle(chatId: string): Promise<void> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 60_000);
  try {
    for await (const ev of client.stream(chatId, { signal: ac.signal })) {
      if (ev.type === "status" && (ev.data.status === "waiting" || ev.data.status === "error")) return;
    }
    assert.fail(`chat ${chatId} did not become idle`);
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/**
 * A fetch that tells when chatd answered a create (POST /api/v1/chats):
 * `created` resolves with the answer's JSON. `before` may delay or fail a
 * create (it runs before the request is made), `after` may drop its answer
 * (throw) once chatd answered.
 */
export function watchingFetch(o: { before?: (n: number) => Promise<void>; after?: (n: number) => void } = {}) {
  let resolve!: (v: unknown) => void;
  const created = new Promise<unknown>((r) => (resolve = r));
  let creates = 0;
  const f: typeof fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (init?.method !== "POST" || !url.endsWith("/api/v1/chats")) return fetch(input, init);
    const n = ++creates;
    await o.before?.(n);
    const resp = await fetch(input, init);
    const body = await resp.text();
    if (resp.ok) resolve(JSON.parse(body));
    o.after?.(n);
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  return { fetch: f, created, creates: () => creates };
}

/**
 * A fetch that counts the chat streams it opened and that are still open
 * (their bodies neither read to the end nor cancelled); `closed()`
 * resolves once none is.
 */
export function streamCountingFetch() {
  let open = 0;
  let waiters: (() => void)[] = [];
  const finish = () => {
    if (--open === 0) for (const w of waiters.splice(0)) w();
  };
  const f: typeof fetch = async (input, init) => {
    const resp = await fetch(input, init);
    const url = input instanceof Request ? input.url : String(input);
    if (!new URL(url).pathname.endsWith("/stream") || !resp.body) return resp;
    open++;
    const reader = resp.body.getReader();
    let ended = false;
    const end = () => {
      if (!ended) {
        ended = true;
        finish();
      }
    };
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        try {
          const r = await reader.read();
          if (r.done) {
            end();
            c.close();
          } else c.enqueue(r.value);
        } catch (err) {
          end();
          c.error(err);
        }
      },
      cancel(reason) {
        end();
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  const closed = () => new Promise<void>((r) => (open === 0 ? r() : waiters.push(r)));
  return { fetch: f, open: () => open, closed };
}

/**
 * Whether p could be a partial value of full, as chatd's partials are:
 * strings cut short, arrays and objects with members still missing (the
 * last one cut short), other values whole.
 */
export function isPartialOf(p: unknown, full: unknown): boolean {
  if (typeof p === "string") return typeof full === "string" && full.startsWith(p);
  if (Array.isArray(p)) return Array.isArray(full) && p.length <= full.length && p.every((x, i) => isPartialOf(x, full[i]));
  if (p && typeof p === "object") {
    if (!full || typeof full !== "object" || Array.isArray(full)) return false;
    const f = full as Record<string, unknown>;
    return Object.entries(p).every(([k, v]) => k in f && isPartialOf(v, f[k]));
  }
  return p === full;
}
