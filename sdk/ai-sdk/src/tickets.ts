import type { ChatdClient, StreamEvent } from "@chatd/client";

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });

// The event names of a chat's stream (docs/streams.md).
const names = ["message", "message_part", "status", "queue", "action_required", "history_reset", "preview_reset", "structured_output_partial", "error"];

/**
 * A chat's stream read with the browser's EventSource, which cannot send
 * the Authorization header: each connection opens with a single-use
 * stream ticket. EventSource would reconnect with the same (used) ticket,
 * so a dropped connection is closed here and reopened with a new ticket
 * and after_id set to the last message id delivered.
 */
export async function* ticketStream(
  client: ChatdClient,
  chatId: string,
  o: { afterId: number; signal: AbortSignal; EventSource: typeof EventSource; backoffMs?: number },
): AsyncGenerator<StreamEvent> {
  let last = o.afterId;
  let backoff = o.backoffMs ?? 250;
  while (!o.signal.aborted) {
    let url: string;
    try {
      url = await client.eventSourceUrl(chatId, { afterId: last }, { signal: o.signal });
    } catch (err) {
      if (o.signal.aborted) return;
      throw err;
    }
    const queue: StreamEvent[] = [];
    let broken = false;
    let wake: (() => void) | undefined;
    const es = new o.EventSource(url);
    const onAbort = () => {
      broken = true;
      wake?.();
    };
    o.signal.addEventListener("abort", onAbort, { once: true });
    for (const name of names) {
      es.addEventListener(name, (ev: Event) => {
        const me = ev as MessageEvent<string>;
        if (typeof me.data !== "string") {
          broken = true; // the connection's own error, not the server's event
        } else {
          const data: unknown = me.data === "" ? {} : JSON.parse(me.data);
          if (name === "message") {
            // The SSE id starts with the highest message id delivered.
            last = Number.parseInt(me.lastEventId, 10) || last;
            queue.push({ type: "message", id: last, data } as StreamEvent);
          } else {
            queue.push({ type: name, data } as StreamEvent);
          }
          backoff = o.backoffMs ?? 250;
        }
        wake?.();
      });
    }
    try {
      for (;;) {
        const ev = queue.shift();
        if (ev) {
          yield ev;
          continue;
        }
        if (broken || o.signal.aborted) break;
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
    } finally {
      es.close();
      o.signal.removeEventListener("abort", onAbort);
    }
    if (o.signal.aborted) return;
    try {
      await sleep(backoff, o.signal);
    } catch {
      return;
    }
    backoff = Math.min(backoff * 2, 5000);
  }
}
