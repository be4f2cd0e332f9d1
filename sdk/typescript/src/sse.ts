import type { components, operations } from "./schema.js";
import { ChatdError, errorOf, sleep } from "./errors.js";

type S = components["schemas"];

/** An event of a chat's stream, typed by its name. */
export type StreamEvent =
  /** `id` is the highest message id the stream has sent. */
  | { type: "message"; id: number; data: S["ChatMessage"] }
  | { type: "message_part"; data: S["MessagePartEvent"] }
  | { type: "status"; data: S["Chat"] }
  | { type: "queue"; data: S["QueueEvent"] }
  | { type: "action_required"; data: S["ActionRequired"] }
  | { type: "history_reset"; data: Record<string, never> }
  | { type: "preview_reset"; data: S["PreviewReset"] }
  /** A provider call of the running turn failed and will be made again: attempt, next try, last error. */
  | { type: "provider_retry"; data: S["ProviderRetry"] }
  /** The value the finalizer call shows so far while the model writes it: a preview, never a result (see `partials`). */
  | { type: "structured_output_partial"; data: S["StructuredOutputPartial"] }
  /** The server's own error event: a failed turn, the chat is gone, or the stream's token was revoked or expired. Not a transport error. */
  | { type: "error"; data: S["StreamError"] }
  | UnknownEvent;

/** An event of the watch stream. */
export type WatchEvent =
  | { type: "chat"; data: S["Chat"] }
  /** The last event when the watch's token was revoked or expired. Not a transport error. */
  | { type: "error"; data: S["StreamError"] }
  | UnknownEvent;

// The OpenAPI document types each stream's events: the SDK's events must be
// exactly those, with the same data types, or this does not compile (a
// server that adds an event fails the SDK's build after make generate-sdk).
type StreamDoc = operations["Stream"]["responses"][200]["content"]["text/event-stream"];
type WatchDoc = operations["Watch"]["responses"][200]["content"]["text/event-stream"];
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Matches<Doc extends { event: string; data: unknown }, Sdk extends { type: string; data: unknown }> =
  Same<Doc["event"], Exclude<Sdk["type"], "unknown">> extends true
    ? false extends { [N in Doc["event"]]: Same<Extract<Doc, { event: N }>["data"], Extract<Sdk, { type: N }>["data"]> }[Doc["event"]]
      ? false
      : true
    : false;
type Assert<T extends true> = T;
export type _StreamEventsMatchTheDocument = Assert<Matches<StreamDoc, StreamEvent>>;
export type _WatchEventsMatchTheDocument = Assert<Matches<WatchDoc, WatchEvent>>;

/** An event this SDK does not know (newer servers add events). */
export type UnknownEvent = { type: "unknown"; event: string; data: unknown };

export interface StreamOptions {
  /** Start after this message id (default: the whole history). */
  afterId?: number;
  signal?: AbortSignal;
  /** Told before each reconnection, with the Last-Event-ID it will send and why the connection ended. */
  onReconnect?: (info: { attempt: number; lastEventId?: string; cause?: unknown }) => void;
}

interface Init {
  fetch: typeof fetch;
  /** The credentials, asked anew for each connection (a JWT may have been refreshed). */
  headers: () => Promise<Record<string, string>>;
  backoffMs: number;
}

// The event names decoded as typed events: those of StreamEvent and WatchEvent.
const known = new Set(["message", "message_part", "status", "queue", "action_required", "history_reset", "preview_reset", "provider_retry", "structured_output_partial", "error", "chat"]);

/**
 * Reads a Server-Sent Events stream with fetch (so it sends the
 * Authorization header, which EventSource cannot), reconnecting with
 * Last-Event-ID after a dropped connection until the signal aborts. A 4xx
 * answer other than 429 ends it with a ChatdError; 5xx and connection errors
 * are retried with backoff.
 */
export async function* readStream<E>(init: Init, url: string, o: StreamOptions): AsyncGenerator<E> {
  let lastId = o.afterId ? String(o.afterId) : undefined;
  let backoff = init.backoffMs;
  let attempt = 0;
  for (;;) {
    let cause: unknown;
    try {
      const headers: Record<string, string> = { ...(await init.headers()), Accept: "text/event-stream" };
      if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
      const resp = await init.fetch(url, { headers, signal: o.signal ?? null });
      if (!resp.ok || !resp.body) {
        const err = await errorOf(resp);
        if (resp.status >= 400 && resp.status < 500 && resp.status !== 429) throw err;
        cause = err;
      } else {
        backoff = init.backoffMs;
        for await (const ev of parseEvents(resp.body)) {
          if (o.signal?.aborted) return; // nothing more after an abort, buffered events included
          if (ev.id !== undefined) lastId = ev.id;
          yield decode(ev) as E;
        }
      }
    } catch (err) {
      if (err instanceof ChatdError && err.status < 500 && err.status !== 429) throw err;
      if (o.signal?.aborted) return;
      cause = err;
    }
    if (o.signal?.aborted) return;
    attempt++;
    o.onReconnect?.({ attempt, ...(lastId !== undefined ? { lastEventId: lastId } : {}), cause });
    try {
      await sleep(backoff, o.signal);
    } catch {
      return;
    }
    backoff = Math.min(backoff * 2, 5000);
  }
}

interface RawEvent {
  event: string;
  data: string;
  id?: string;
}

function decode(ev: RawEvent): unknown {
  const data: unknown = ev.data === "" ? {} : JSON.parse(ev.data);
  if (!known.has(ev.event)) return { type: "unknown", event: ev.event, data };
  // The SSE id is the highest message id sent, then, once the stream sent
  // preview fragments, ":history:attempt:seq" (where a reconnection resumes).
  if (ev.event === "message") return { type: "message", id: Number((ev.id ?? "0").split(":")[0]), data };
  return { type: ev.event, data };
}

/** Parses the text/event-stream format (comments are keep-alives). */
async function* parseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<RawEvent> {
  const reader = body.getReader();
  const text = new TextDecoder();
  let buf = "";
  let ev: RawEvent = { event: "message", data: "" };
  let hasData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += text.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (hasData) yield ev;
          ev = { event: "message", data: "" };
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") ev.event = val;
        else if (field === "id") ev.id = val;
        else if (field === "data") {
          ev.data = hasData ? `${ev.data}\n${val}` : val;
          hasData = true;
        }
      }
    }
  } finally {
    // A reader that stops early closes the connection.
    await reader.cancel().catch(() => {});
  }
}
