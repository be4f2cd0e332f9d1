import type { ChatMessage, Schemas, StreamEvent, Usage } from "@chatd/client";

/** The server-owned finalizer tool of structured requests: never shown to the AI SDK. */
export const FINALIZER = "coder_structured_output";

type Part = Schemas["MessagePart"];
export type ToolCall = Schemas["ToolCall"];
export type StructuredOutput = Schemas["StructuredOutput"];

/**
 * Where the turn starts: after a message id (the user message or the tool
 * results that started it), or at a queued message still to move into
 * history (found by its request id, or by its content).
 */
export type Anchor =
  | { after: number }
  | { queued: number; requestId?: string; content: string };

/** Text kinds of a step: the model's text, its reasoning, and prose it wrote in a structured turn (shown as reasoning). */
export type Kind = "text" | "reasoning" | "prose";

/**
 * What a turn produces, in order, for the model's stream and the UI
 * transport to render. Previews (deltas) are reconciled with the committed
 * message of their step, so the text of a step is never lost or doubled
 * (see reconcile).
 */
export type Piece =
  | { type: "step-start" }
  | { type: "step-reset" }
  /** A step ends, with its committed message (none when the step is known only from the pending calls it made). */
  | { type: "step-end"; message?: ChatMessage }
  | { type: "block-start"; kind: Kind; id: string }
  | { type: "block-delta"; kind: Kind; id: string; delta: string }
  | { type: "block-end"; kind: Kind; id: string }
  | { type: "tool-input-start"; id: string; toolName: string; server: boolean }
  | { type: "tool-input-delta"; id: string; delta: string }
  | { type: "tool-input-end"; id: string }
  | { type: "tool-call"; id: string; toolName: string; args: unknown; server: boolean; messageId?: number }
  | { type: "tool-result"; id: string; toolName: string; result: unknown; isError: boolean }
  | { type: "source"; id: string; url: string; title?: string }
  | { type: "partial"; value: unknown; restarted: boolean; requestId: string };

/** How a turn (or the part of it a call follows) ended. */
export type Outcome =
  | { type: "receipt"; output: StructuredOutput; messageId: number }
  | { type: "tool-calls"; calls: ToolCall[]; messageId?: number }
  | { type: "done" }
  | { type: "idle" }
  | { type: "failed"; code?: string; message: string };

export interface TurnOptions {
  anchor: Anchor;
  /** The structured request the turn answers; its receipt ends the turn. */
  requestId: string | undefined;
  /** Names of the client tools (the AI SDK's): calls of other tools run on the server. */
  clientTools: ReadonlySet<string>;
  /**
   * The consumer can take back what a step showed (the UI's reset-step):
   * a generation the server abandons is retracted instead of left standing.
   */
  retract: boolean;
  /**
   * The stream was opened before the write: its first events tell the
   * chat as it was, and the turn is followed from its anchor message on.
   */
  opened: boolean;
  emit: (p: Piece) => void;
}

interface Block {
  id: string;
  emitted: string;
}

/**
 * Reads a chat's stream from its anchor until the turn ends, emitting its
 * steps as pieces, and returns how it ended. Previews of a generation are
 * shown only while they are contiguous from its first fragment (seq 1, 2,
 * …): a stream that joins mid-step, reconnects, or loses fragments shows no
 * more of that step until its message commits, which then supplies the rest.
 */
export async function readTurn(events: AsyncIterable<StreamEvent>, o: TurnOptions): Promise<Outcome> {
  const r = new Reader(o);
  for await (const ev of events) {
    const out = r.push(ev);
    if (out) return out;
  }
  return r.ended();
}

class Reader {
  private after: number | undefined;
  // live: the stream has reached the turn (its anchor message, or past it).
  private live: boolean;
  // initial: the events of a stream opened before the write still tell the
  // chat as it was then (a stream's first read ends with its status).
  private initial: boolean;
  private readonly done = new Set<number>();
  private readonly structured: boolean;
  // The generation whose previews are shown.
  private gen = { key: "", lastSeq: 0, frozen: false, committed: false };
  private open = false;
  private blocks = new Map<Kind, Block>();
  private tools = new Map<string, { toolName: string; hidden: boolean; started: boolean }>();
  private lastTool = "";
  private readonly shownCalls = new Set<string>();
  private readonly clientCalls = new Set<string>();
  private restarted = false;
  private failure: { code?: string; message: string } | undefined;
  private n = 0;
  private lastStep: number | undefined;

  constructor(private readonly o: TurnOptions) {
    this.after = "after" in o.anchor ? o.anchor.after : undefined;
    this.live = this.after !== undefined && !o.opened;
    this.initial = o.opened;
    this.structured = o.requestId !== undefined;
  }

  ended(): Outcome {
    const f = this.failure ?? { message: "chatd: the chat's stream ended before the turn did" };
    return { type: "failed", ...f };
  }

  push(ev: StreamEvent): Outcome | undefined {
    switch (ev.type) {
      case "message":
        return this.message(ev.data);
      case "message_part":
        if (this.live) this.preview(ev.data);
        return undefined;
      case "preview_reset":
        this.reset(`${ev.data.history_version}:${ev.data.generation_attempt}`);
        return undefined;
      case "structured_output_partial":
        if (this.live && ev.data.request_id === this.o.requestId) {
          this.o.emit({ type: "partial", value: ev.data.value, restarted: this.restarted, requestId: ev.data.request_id });
          this.restarted = false;
        }
        return undefined;
      case "action_required":
        return this.action(ev.data.tool_calls);
      case "status": {
        const first = this.initial;
        this.initial = false;
        if (ev.data.status !== "waiting" || first) return undefined;
        if (this.live) return this.structured ? { type: "idle" } : this.finish({ type: "done" });
        // Idle, and the queued message never reached the history: it was
        // deleted (a structured one ends with its cancelled receipt).
        if (this.after === undefined && !this.structured) {
          return { type: "failed", code: "queue_deleted", message: "chatd: the queued message was deleted" };
        }
        return undefined;
      }
      case "error":
        this.failure = { ...(ev.data.code !== undefined ? { code: ev.data.code } : {}), message: ev.data.message };
        if (this.live && !this.structured) return this.finish({ type: "failed", ...this.failure });
        return undefined;
      case "history_reset":
        // An edit discarded messages: a structured turn ends with its
        // (superseded) receipt; an ordinary one has nothing left to show.
        if (this.live && !this.structured) {
          return this.finish({ type: "failed", code: "superseded", message: "chatd: an edit discarded this turn" });
        }
        return undefined;
      default:
        return undefined;
    }
  }

  private message(m: ChatMessage): Outcome | undefined {
    if (this.done.has(m.id)) return undefined;
    this.done.add(m.id);
    if (m.structured_output && m.structured_output.request_id === this.o.requestId && this.after === undefined) {
      return this.finish({ type: "receipt", output: m.structured_output, messageId: m.id }); // a queued request deleted
    }
    if (this.after === undefined) {
      if (m.role === "user") this.claim(m);
      return undefined;
    }
    if (m.id === this.after) this.live = true;
    if (m.id <= this.after) return undefined;
    this.live = true;
    if (m.structured_output) {
      if (m.structured_output.request_id !== this.o.requestId) return undefined;
      return this.finish({ type: "receipt", output: m.structured_output, messageId: m.id });
    }
    switch (m.role) {
      case "user":
        // The next queued turn started: an ordinary turn is over (a
        // structured one ends with its receipt, committed before).
        return this.structured ? undefined : this.finish({ type: "done" });
      case "assistant":
        this.commit(m);
        // A step without tool calls is an ordinary turn's last (its
        // status may never change on the stream: a turn that ran between
        // two reads of a stream opened before the write is idle again).
        if (!this.structured && !m.content.some((p) => p.type === "tool-call")) return { type: "done" };
        return undefined;
      case "tool":
        this.results(m.content);
        return undefined;
    }
    return undefined;
  }

  // claim recognises the queued message the turn answers once it moved
  // into history.
  private claim(m: ChatMessage) {
    const a = this.o.anchor;
    if (!("queued" in a)) return;
    if (a.requestId !== undefined) {
      if (m.structured_output_request_id === a.requestId) {
        this.after = m.id;
        this.live = true;
      }
      return;
    }
    // An ordinary queued message keeps no id into the history: it is the
    // first user message with its content that the history gains after
    // the write (the stream was opened before it).
    if (!this.initial && textOf(m.content, "text") === a.content) {
      this.after = m.id;
      this.live = true;
    }
  }

  private action(calls: ToolCall[]): Outcome | undefined {
    if (!this.live) return undefined;
    if (calls.length === 0) return undefined; // spawn_agent: children answer, not the client
    for (const c of calls) {
      if (this.shownCalls.has(c.tool_call_id)) continue;
      this.stepStart();
      this.shownCalls.add(c.tool_call_id);
      this.o.emit({ type: "tool-call", id: c.tool_call_id, toolName: c.tool_name, args: c.args, server: false });
    }
    if (this.open) {
      this.open = false;
      this.o.emit({ type: "step-end" });
    }
    return { type: "tool-calls", calls, ...(this.lastStep !== undefined ? { messageId: this.lastStep } : {}) };
  }

  private finish(out: Outcome): Outcome {
    this.abandon(true);
    return out;
  }

  private stepStart() {
    if (this.open) return;
    this.open = true;
    this.o.emit({ type: "step-start" });
  }

  // abandon closes what previews opened for a generation that will not
  // commit (a new attempt, an interrupt, an edit). A consumer that can
  // retract takes the step's previews back and keeps the step open for
  // the next generation (or, at the end, closes it empty); others end
  // what was shown.
  private abandon(final = false) {
    if (!this.open) return;
    if (this.o.retract) {
      this.o.emit({ type: "step-reset" });
      if (final) this.o.emit({ type: "step-end" });
      this.open = !final;
    } else {
      for (const [kind, b] of this.blocks) this.o.emit({ type: "block-end", kind, id: b.id });
      for (const [id, t] of this.tools) if (t.started) this.o.emit({ type: "tool-input-end", id });
      this.open = false;
    }
    this.blocks = new Map();
    this.tools = new Map();
  }

  private reset(key: string) {
    this.restarted = true;
    if (!newer(key, this.gen.key)) {
      this.gen.frozen = true; // a gap: the commit supplies the rest
      return;
    }
    this.abandon();
    this.gen = { key, lastSeq: 0, frozen: false, committed: false };
  }

  private preview(d: Schemas["MessagePartEvent"]) {
    const key = `${d.history_version}:${d.generation_attempt}`;
    if (key !== this.gen.key) {
      if (!newer(key, this.gen.key)) return; // a stale generation's fragment
      this.abandon();
      this.gen = { key, lastSeq: 0, frozen: false, committed: false };
    }
    const g = this.gen;
    if (g.frozen || g.committed) return;
    // A part covers fragments from_seq..seq (a server's catch-up of a step
    // coalesces them); pieces of one split fragment share its number.
    const from = (d as { from_seq?: number }).from_seq ?? d.seq;
    if (!(from === g.lastSeq + 1 || (from === g.lastSeq && d.seq === g.lastSeq))) {
      g.frozen = true; // joined mid-step, or fragments were lost
      return;
    }
    g.lastSeq = d.seq;
    const p = d.part;
    switch (p.type) {
      case "text":
        this.delta(this.structured ? "prose" : "text", p.text);
        break;
      case "reasoning":
        this.delta("reasoning", p.text ?? "");
        break;
      case "tool-call": {
        const id = p.tool_call_id || this.lastTool;
        if (!id) return;
        this.lastTool = id;
        let t = this.tools.get(id);
        if (!t) {
          const toolName = p.tool_name ?? "";
          t = { toolName, hidden: this.structured && toolName === FINALIZER, started: false };
          this.tools.set(id, t);
        }
        if (t.hidden || !p.args_delta) return;
        this.stepStart();
        if (!t.started) {
          t.started = true;
          this.o.emit({ type: "tool-input-start", id, toolName: t.toolName, server: !this.o.clientTools.has(t.toolName) });
        }
        this.o.emit({ type: "tool-input-delta", id, delta: p.args_delta });
        break;
      }
    }
  }

  private delta(kind: Kind, text: string) {
    if (!text) return;
    this.stepStart();
    const b = this.block(kind);
    b.emitted += text;
    this.o.emit({ type: "block-delta", kind, id: b.id, delta: text });
  }

  private block(kind: Kind): Block {
    let b = this.blocks.get(kind);
    if (!b) {
      b = { id: `${kind}-${++this.n}`, emitted: "" };
      this.blocks.set(kind, b);
      this.o.emit({ type: "block-start", kind, id: b.id });
    }
    return b;
  }

  // commit ends a step with its committed message: what the previews
  // showed is completed from it (or, if they diverged, replaced or
  // repeated), then its tool calls and sources follow.
  private commit(m: ChatMessage) {
    this.lastStep = m.id;
    if (this.gen.key !== "") this.gen.committed = true;
    const texts: [Kind, string][] = [
      ["reasoning", textOf(m.content, "reasoning")],
      [this.structured ? "prose" : "text", textOf(m.content, "text")],
    ];
    const diverged = texts.some(([kind, full]) => {
      const b = this.blocks.get(kind);
      return b !== undefined && !full.startsWith(b.emitted);
    });
    if (diverged && this.o.retract) this.abandon();
    this.stepStart();
    for (const [kind, full] of texts) {
      let b = this.blocks.get(kind);
      if (b && !full.startsWith(b.emitted)) {
        this.o.emit({ type: "block-end", kind, id: b.id });
        this.blocks.delete(kind);
        b = undefined;
      }
      if (!b && full === "") continue;
      b ??= this.block(kind);
      const rest = full.slice(b.emitted.length);
      if (rest) this.o.emit({ type: "block-delta", kind, id: b.id, delta: rest });
      this.o.emit({ type: "block-end", kind, id: b.id });
    }
    for (const p of m.content) this.committedPart(p, m.id);
    this.blocks = new Map();
    this.tools = new Map();
    this.open = false;
    this.o.emit({ type: "step-end", message: m });
  }

  private committedPart(p: Part, messageId: number) {
    if (p.type === "source" && p.url) {
      this.o.emit({ type: "source", id: p.source_id ?? p.url, url: p.url, ...(p.title ? { title: p.title } : {}) });
      return;
    }
    if (p.type !== "tool-call" || !p.tool_call_id) return;
    const id = p.tool_call_id;
    const toolName = p.tool_name ?? "";
    if (this.structured && toolName === FINALIZER) return;
    if (this.tools.get(id)?.started) this.o.emit({ type: "tool-input-end", id });
    if (this.shownCalls.has(id)) return;
    this.shownCalls.add(id);
    const server = !this.o.clientTools.has(toolName);
    if (!server) this.clientCalls.add(id);
    this.o.emit({ type: "tool-call", id, toolName, args: p.args ?? {}, server, messageId });
  }

  // results shows the results of the server's own tools (its tools, MCP);
  // results of client tools are the caller's own, and the finalizer's are
  // the server's feedback to the model.
  private results(parts: Part[]) {
    for (const p of parts) {
      if (p.type !== "tool-result" || !p.tool_call_id) continue;
      const toolName = p.tool_name ?? "";
      if ((this.structured && toolName === FINALIZER) || this.clientCalls.has(p.tool_call_id) || this.o.clientTools.has(toolName)) continue;
      this.o.emit({ type: "tool-result", id: p.tool_call_id, toolName, result: p.result ?? null, isError: p.is_error === true });
    }
  }
}

/** Whether generation key a ("history:attempt") comes after b ("" comes before all). */
function newer(a: string, b: string): boolean {
  if (b === "") return true;
  const [ah = 0, aa = 0] = a.split(":").map(Number);
  const [bh = 0, ba = 0] = b.split(":").map(Number);
  return ah > bh || (ah === bh && aa > ba);
}

/** The concatenated text of a message's parts of one type. */
export function textOf(parts: Part[], type: "text" | "reasoning"): string {
  let s = "";
  for (const p of parts) if (p.type === type) s += p.text ?? "";
  return s;
}

/** Sums usage per kind; a kind stays null until some step reports it. */
export function addUsage(a: Usage | undefined, b: Usage | undefined): Usage | undefined {
  if (!b) return a;
  if (!a) return { ...b };
  const add = (x: number | null | undefined, y: number | null | undefined) => (x == null ? (y ?? null) : y == null ? x : x + y);
  return {
    input_tokens: add(a.input_tokens, b.input_tokens),
    output_tokens: add(a.output_tokens, b.output_tokens),
    cache_read_tokens: add(a.cache_read_tokens, b.cache_read_tokens),
    cache_write_tokens: add(a.cache_write_tokens, b.cache_write_tokens),
    reasoning_tokens: add(a.reasoning_tokens, b.reasoning_tokens),
  };
}
