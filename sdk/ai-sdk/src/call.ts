import type { Attempt, ChatdClient, StreamEvent, StructuredOutputResult, Usage } from "@chatd/client";
import { ChatdError } from "@chatd/client";
import { apiError, ChatdTurnError } from "./errors.js";
import type { Action } from "./prompt.js";
import { readTurn, type Anchor, type Outcome, type Piece, type StructuredOutput } from "./turn.js";

/** Where a write left the chat: the turn to follow. */
export interface Started {
  chatId: string;
  anchor: Anchor;
  /** The stream starts after this message id. */
  afterId: number;
  requestId: string | undefined;
  /** The chat's model, when the answer said. */
  model: string | undefined;
  /** The chat's stream, opened before the write when the chat was known. */
  events?: AsyncIterable<StreamEvent>;
}

/** A terminal structured result, with chatd's attempts. */
export interface Receipt {
  output: StructuredOutput;
  messageId: number;
  rejectedAttempts: Attempt[];
}

/** Opens a chat's stream after a message id (the SDK's fetch reader, or EventSource with tickets). */
export type Events = (client: ChatdClient, chatId: string, afterId: number, signal: AbortSignal) => AsyncIterable<StreamEvent>;

const fetchEvents: Events = (client, chatId, afterId, signal) => client.stream(chatId, { afterId, signal });

/**
 * One model call against chatd: its write (create, send or tool results),
 * then its turn, followed on the chat's stream. An abort of the caller's
 * signal rejects at once with the signal's reason and interrupts the turn,
 * with a request of its own (the caller's signal is already aborted); a
 * write still in flight is let finish, so the chat it made is interrupted
 * too. A call whose turn paused for client tool calls keeps listening: an
 * abort while the caller runs them interrupts the paused turn.
 */
export class Call {
  /** Names of the client tools (the caller's): calls of other tools run on the server. */
  clientTools: ReadonlySet<string> = new Set();
  private chatId: string | undefined;
  private interruptOnStart = false;
  private detach = () => {};
  private readonly stop = new AbortController();
  // streams ends the call's chat stream once its turn is read (or the
  // write failed): a stream holds a connection and one of the user's
  // stream slots on the server.
  private readonly streams = new AbortController();
  private readonly aborted: Promise<never>;

  constructor(
    readonly client: ChatdClient,
    private readonly signal: AbortSignal | undefined,
    private readonly events: Events = fetchEvents,
  ) {
    this.aborted = new Promise<never>((_, reject) => {
      if (!signal) return;
      const onAbort = () => {
        reject(signal.reason);
        this.stop.abort();
        this.streams.abort();
        if (this.chatId) this.interrupt(this.chatId);
        else this.interruptOnStart = true;
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
      this.detach = () => signal.removeEventListener("abort", onAbort);
    });
    this.aborted.catch(() => {});
  }

  /** Makes the call's write; rejects at once on abort. */
  write(a: Action): Promise<Started> {
    const w = this.doWrite(a).then(
      (s) => {
        this.chatId = s.chatId;
        if (this.interruptOnStart) this.interrupt(s.chatId);
        return s;
      },
      (err: unknown) => {
        this.detach();
        throw err;
      },
    );
    w.catch(() => {});
    return Promise.race([w, this.aborted]);
  }

  /** Follows the turn until it ends, emitting its pieces; rejects at once on abort. */
  follow(s: Started, emit: (p: Piece) => void, o: { tap?: (ev: StreamEvent) => void; retract?: boolean } = {}): Promise<Outcome> {
    const events = s.events ?? this.events(this.client, s.chatId, s.afterId, this.streams.signal);
    const run = readTurn(o.tap ? tapped(events, o.tap) : events, {
      anchor: s.anchor,
      requestId: s.requestId,
      clientTools: this.clientTools,
      retract: o.retract ?? false,
      opened: s.events !== undefined,
      emit,
    })
      .then(
        (out) => {
          if (out.type !== "tool-calls") this.detach();
          return out;
        },
        (err: unknown) => {
          this.detach();
          throw apiError(err, this.client.baseUrl, undefined);
        },
      )
      .finally(() => this.streams.abort());
    run.catch(() => {});
    return Promise.race([run, this.aborted]);
  }

  /** Stops following (a consumer that stopped reading), without interrupting the turn. */
  cancel() {
    this.stop.abort();
    this.streams.abort();
  }

  /**
   * The receipt of a structured turn with its rejected attempts: from the
   * outcome, or (a turn that went idle without one on the stream) from the
   * lookup. A failed or cancelled receipt is thrown as a ChatdTurnError.
   */
  async receipt(s: Started, out: Outcome): Promise<Receipt> {
    const requestId = s.requestId as string;
    let output: StructuredOutput;
    let messageId: number;
    let looked: StructuredOutputResult | undefined;
    if (out.type === "receipt") {
      output = out.output;
      messageId = out.messageId;
    } else {
      looked = await this.race(this.client.waitStructuredOutput(requestId, { signal: this.stop.signal }));
      output = receiptOf(looked);
      messageId = looked.receipt_message_id ?? 0;
    }
    let rejected = output.error?.attempts;
    if (rejected === undefined && output.status !== "failed") {
      looked ??= await this.race(this.client.getStructuredOutput(requestId, {}, { signal: this.stop.signal }));
      rejected = looked.attempts;
    }
    if (output.status !== "succeeded") {
      const e = output.error;
      throw new ChatdTurnError({
        message: `chatd: structured output ${output.status}${e ? ` (${e.code}): ${e.message}` : ""}`,
        code: e?.code,
        status: output.status,
        chatId: s.chatId,
        requestId,
        receiptMessageId: messageId,
        rejectedAttempts: rejected,
        usage: output.usage,
      });
    }
    return { output, messageId, rejectedAttempts: rejected ?? [] };
  }

  /** A failed ordinary turn as a ChatdTurnError. */
  failed(s: Started, out: Extract<Outcome, { type: "failed" }>, usage: Usage | undefined): ChatdTurnError {
    return new ChatdTurnError({ message: out.message, code: out.code, status: "failed", chatId: s.chatId, usage });
  }

  private race<T>(p: Promise<T>): Promise<T> {
    p.catch(() => {});
    return Promise.race([
      p.catch((err) => {
        throw apiError(err, this.client.baseUrl, undefined);
      }),
      this.aborted,
    ]);
  }

  private interrupt(chatId: string) {
    // A fresh request: the caller's signal is already aborted. A turn that
    // is already over answers 409, which is fine.
    this.client.interrupt(chatId).catch(() => {});
  }

  // open connects to a chat's stream before a write that continues the
  // chat, so that the turn's first step is followed from its first
  // fragment: the server sends the history, queue and status first, so
  // the first event says the stream is connected. Events then wait, in
  // order, for the reader.
  private async open(chatId: string, afterId: number): Promise<AsyncIterable<StreamEvent>> {
    const it = this.events(this.client, chatId, afterId, this.streams.signal)[Symbol.asyncIterator]();
    const first = await it.next();
    if (this.signal?.aborted) throw this.signal.reason;
    return (async function* () {
      try {
        if (first.done) return;
        yield first.value;
        for (let n = await it.next(); !n.done; n = await it.next()) yield n.value;
      } finally {
        await it.return?.(undefined); // a reader that stops early closes the connection
      }
    })();
  }

  private async doWrite(a: Action): Promise<Started> {
    try {
      return await this.written(a);
    } catch (err) {
      this.streams.abort(); // a stream opened for the write
      throw apiError(err, this.client.baseUrl, "body" in a ? a.body : { results: a.results });
    }
  }

  private async written(a: Action): Promise<Started> {
    const c = this.client;
    switch (a.kind) {
      case "create": {
        const res = await c.createChat(a.body, { idempotencyKey: a.idempotencyKey });
        const m = res.messages[0];
        if (!m) throw new Error("chatd: the create answered no message");
        return { chatId: res.chat.id, anchor: { after: m.id }, afterId: m.id, requestId: m.structured_output_request_id, model: res.chat.model };
      }
      case "send": {
        const events = await this.open(a.chatId, a.afterHint);
        const res = await c.send(a.chatId, a.body, { idempotencyKey: a.idempotencyKey });
        if (!res.queued) {
          const m = res.message;
          return { chatId: a.chatId, anchor: { after: m.id }, afterId: m.id, requestId: m.structured_output_request_id, model: undefined, events };
        }
        const q = res.queued_message;
        const content = a.body.content.map((p) => p.text).join("");
        return {
          chatId: a.chatId,
          anchor: { queued: q.id, content, ...(q.structured_output_request_id ? { requestId: q.structured_output_request_id } : {}) },
          afterId: a.afterHint,
          requestId: q.structured_output_request_id,
          model: undefined,
          events,
        };
      }
      case "edit": {
        const events = await this.open(a.chatId, a.messageId);
        const res = await c.editMessage(a.chatId, a.messageId, a.body);
        const m = res.message;
        return { chatId: a.chatId, anchor: { after: m.id }, afterId: m.id, requestId: m.structured_output_request_id, model: undefined, events };
      }
      case "results": {
        const events = await this.open(a.chatId, a.callMessageId ?? 0);
        const after = await this.submit(a);
        return { chatId: a.chatId, anchor: { after }, afterId: after, requestId: undefined, model: undefined, events };
      }
    }
  }

  // submit answers the pending client calls and returns the id of the tool
  // message that holds the results. A submission whose answer was lost (a
  // dropped connection, a retried call) is found in the history instead of
  // being refused as a second one.
  private async submit(a: Extract<Action, { kind: "results" }>): Promise<number> {
    try {
      const res = await this.client.submitToolResults(a.chatId, { results: a.results });
      return res.message.id;
    } catch (err) {
      const retry = err instanceof TypeError || (err instanceof ChatdError && (err.status === 409 || err.status === 400));
      if (!retry) throw err;
      const found = await this.findResults(a);
      if (found !== undefined) return found;
      throw err;
    }
  }

  private async findResults(a: Extract<Action, { kind: "results" }>): Promise<number | undefined> {
    const want = new Set(a.results.map((r) => r.tool_call_id));
    let after = a.callMessageId ?? 0;
    for (;;) {
      const page = await this.client.listMessages(a.chatId, { afterId: after, limit: 1000 });
      for (const m of page.messages) {
        if (m.role !== "tool") continue;
        const ids = m.content.flatMap((p) => (p.type === "tool-result" && p.tool_call_id ? [p.tool_call_id] : []));
        if (ids.length > 0 && [...want].every((id) => ids.includes(id))) return m.id;
      }
      const last = page.messages[page.messages.length - 1];
      if (!page.has_more || !last) return undefined;
      after = last.id;
    }
  }
}

function receiptOf(r: StructuredOutputResult): StructuredOutput {
  if (r.status === "pending") throw new Error(`chatd: request ${r.request_id} is still pending`);
  // The lookup lists a failed request's attempts as its own `attempts`;
  // the receipt has them in `error.attempts`.
  const error = r.error && r.status === "failed" && r.attempts?.length ? { ...r.error, attempts: r.attempts } : r.error;
  return {
    request_id: r.request_id,
    status: r.status,
    ...(error ? { error } : {}),
    ...(r.usage ? { usage: r.usage } : {}),
    ...("value" in r ? { value: r.value } : {}),
  };
}

async function* tapped(events: AsyncIterable<StreamEvent>, tap: (ev: StreamEvent) => void): AsyncGenerator<StreamEvent> {
  for await (const ev of events) {
    tap(ev);
    yield ev;
  }
}
