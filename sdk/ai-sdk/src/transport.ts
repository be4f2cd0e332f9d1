import { asSchema, type ChatRequestOptions, type ChatTransport, type FlexibleSchema, type UIMessage, type UIMessageChunk } from "ai";
import { ChatdClient, type Schemas } from "@chatd/client";
import { Call, type Events, type Started } from "./call.js";
import { ChatdTurnError } from "./errors.js";
import type { Action } from "./prompt.js";
import { schemaName } from "./prompt.js";
import { clientOptions, type ChatdProviderSettings } from "./provider.js";
import { ticketStream } from "./tickets.js";
import type { Outcome, Piece } from "./turn.js";

/** Where the transport keeps which chatd chat answers which useChat chat. */
export interface ChatStore {
  get(uiChatId: string): string | undefined | Promise<string | undefined>;
  set(uiChatId: string, chatdChatId: string): void | Promise<void>;
}

/** A client tool the chat declares: an AI SDK tool, or its description and input schema. */
export interface TransportTool {
  description?: string;
  /** A zod schema, or jsonSchema({...}) from "ai". */
  inputSchema: FlexibleSchema<unknown>;
}

/** A structured output asked for every message (the value arrives as the data-chatd-receipt part and the text). */
export interface TransportOutput {
  /** A zod schema, or jsonSchema({...}) from "ai". */
  schema: FlexibleSchema<unknown>;
  name?: string;
  description?: string;
}

export interface ChatdTransportOptions extends ChatdProviderSettings {
  /** The chatd model of new chats (default: the server's). */
  model?: string;
  /** The system prompt of new chats. */
  system?: string;
  /** Client tools of new chats: useChat's onToolCall runs them, addToolOutput answers them. */
  tools?: Record<string, TransportTool>;
  /** A structured output for every message; a request's body may override it (`body: { output }`, null for text). */
  output?: TransportOutput;
  /** Which chatd chat answers a useChat chat (default: in memory); the message metadata carries it too. */
  chats?: ChatStore;
  /**
   * How partial values of a structured request are sent: "transient"
   * (default: `data-chatd-partial` parts for useChat's onData, not kept in
   * the message), "part" (one such part in the message, replaced in place
   * by each newer value), or "off".
   */
  partials?: "transient" | "part" | "off";
  /**
   * How the chat's stream is read: "eventsource" (the default in browsers:
   * EventSource with single-use stream tickets) or "fetch" (the default
   * elsewhere: fetch with the Authorization header).
   */
  stream?: "eventsource" | "fetch";
}

/** The metadata the transport puts on assistant messages. */
export interface ChatdMessageMetadata {
  chatd: {
    chatId: string;
    requestId?: string;
    receiptMessageId?: number;
    usage?: Schemas["Usage"];
  };
}

/** The receipt of a structured request, as the `data-chatd-receipt` part's data. */
export interface ChatdReceiptData {
  chatId: string;
  requestId: string;
  receiptMessageId: number;
  status: "succeeded" | "failed" | "cancelled";
  value?: unknown;
  error?: Schemas["StructuredOutputError"];
  /** Finalization attempts: the rejected ones, and the accepted one of a success. */
  attempts: number;
  rejectedAttempts: Schemas["Attempt"][];
  usage?: Schemas["Usage"];
}

/** A partial value of a structured request (never a result: the receipt is). */
export interface ChatdPartialData {
  requestId: string;
  value: unknown;
  /** The model started the value again (a repair, a new attempt): earlier partials are void. */
  restarted: boolean;
}

const memory = (): ChatStore => {
  const m = new Map<string, string>();
  return { get: (k) => m.get(k), set: (k, v) => void m.set(k, v) };
};

/**
 * A useChat ChatTransport over chatd's API and stream, for apps without a
 * server of their own: sendMessages creates or continues a chatd chat (or
 * answers its pending client tool calls, or regenerates by editing the
 * last user message) and streams the turn as UI message chunks;
 * reconnectToStream replays the running turn from its start
 * (resumeStreamIsReplay), so a reconnection loses nothing.
 */
export class ChatdChatTransport<M extends UIMessage = UIMessage> implements ChatTransport<M> {
  readonly resumeStreamIsReplay = true;
  private readonly chats: ChatStore;
  private readonly events: Events;
  private toolDefs: Promise<Schemas["DynamicTool"][]> | undefined;

  constructor(private readonly o: ChatdTransportOptions) {
    this.chats = o.chats ?? memory();
    const es = (globalThis as { EventSource?: typeof EventSource }).EventSource;
    const browser = typeof (globalThis as { window?: unknown }).window !== "undefined";
    const mode = o.stream ?? (es && browser ? "eventsource" : "fetch");
    this.events =
      mode === "eventsource" && es
        ? (client, chatId, afterId, signal) => ticketStream(client, chatId, { afterId, signal, EventSource: es })
        : (client, chatId, afterId, signal) => client.stream(chatId, { afterId, signal });
  }

  async sendMessages(
    o: { trigger: "submit-message" | "regenerate-message"; chatId: string; messageId: string | undefined; messages: M[]; abortSignal: AbortSignal | undefined } & ChatRequestOptions,
  ): Promise<ReadableStream<UIMessageChunk>> {
    const client = new ChatdClient(clientOptions(this.o));
    const chatId = (await this.chats.get(o.chatId)) ?? chatOf(o.messages);
    const last = o.messages[o.messages.length - 1];
    const call = new Call(client, o.abortSignal, this.events);
    call.clientTools = new Set(Object.keys(this.o.tools ?? {}));
    let action: Action;
    let uiMessageId: string | undefined;
    if (last?.role === "assistant") {
      if (!chatId) throw new Error("chatd: the assistant message's chat is unknown (no chatd metadata, nothing in the chat store)");
      action = await this.results(client, chatId, last);
      uiMessageId = last.id;
    } else if (o.trigger === "regenerate-message") {
      if (!chatId) throw new Error("chatd: nothing to regenerate: the chat has no chatd chat yet");
      action = await this.regenerate(client, chatId, o.messages, o.body);
    } else {
      action = await this.send(chatId, o.messages, o.body);
    }
    const s = await call.write(action);
    if (!chatId) await this.chats.set(o.chatId, s.chatId);
    // Tool results continue the turn's structured request, if it has one.
    if (action.kind === "results") s.requestId = (last?.metadata as Partial<ChatdMessageMetadata> | undefined)?.chatd?.requestId;
    return this.turn(call, s, uiMessageId ?? `chatd-${s.chatId}-${s.afterId}`);
  }

  async reconnectToStream(o: { chatId: string; abortSignal?: AbortSignal } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk> | null> {
    const chatId = await this.chats.get(o.chatId);
    if (!chatId) return null;
    const client = new ChatdClient(clientOptions(this.o));
    const chat = await client.getChat(chatId, o.abortSignal ? { signal: o.abortSignal } : {});
    if (chat.status === "waiting" || chat.status === "error") return null;
    // The running turn starts at the last user message: replay it from there.
    const user = await lastUserMessage(client, chatId);
    if (!user) return null;
    const call = new Call(client, o.abortSignal, this.events);
    call.clientTools = new Set(Object.keys(this.o.tools ?? {}));
    const s: Started = { chatId, anchor: { after: user.id }, afterId: user.id, requestId: user.structured_output_request_id, model: undefined };
    return this.turn(call, s, `chatd-${chatId}-${user.id}`);
  }

  private async send(chatId: string | undefined, messages: M[], body: object | undefined): Promise<Action> {
    const content = newUserContent(messages);
    const response_format = await this.format(body);
    const key = crypto.randomUUID();
    if (chatId) {
      return { kind: "send", chatId, body: { content, ...(response_format ? { response_format } : {}) }, idempotencyKey: key, afterHint: lastChatdMessage(messages) };
    }
    const tools = await this.tools();
    return {
      kind: "create",
      idempotencyKey: key,
      body: {
        content,
        ...(this.o.model ? { model: this.o.model } : {}),
        ...(this.o.system ? { system_prompt: this.o.system } : {}),
        ...(response_format ? { response_format } : {}),
        ...(tools.length > 0 ? { dynamic_tools: tools } : {}),
      },
    };
  }

  private async regenerate(client: ChatdClient, chatId: string, messages: M[], body: object | undefined): Promise<Action> {
    const user = await lastUserMessage(client, chatId);
    if (!user) throw new Error("chatd: the chat has no user message to regenerate from");
    const content = newUserContent(messages);
    const override = body && "output" in body;
    const response_format = override ? ((await this.format(body)) ?? { type: "text" as const }) : undefined;
    return { kind: "edit", chatId, messageId: user.id, body: { content, ...(response_format ? { response_format } : {}) } };
  }

  // results answers the chat's pending client calls with the outputs the
  // app added to the assistant message (addToolOutput).
  private async results(client: ChatdClient, chatId: string, last: M): Promise<Action> {
    const chat = await client.getChat(chatId);
    const pending = new Set((chat.pending_tool_calls ?? []).map((c) => c.tool_call_id));
    const results: Schemas["ToolResult"][] = [];
    let callMessageId: number | undefined;
    for (const p of last.parts as { type: string; toolCallId?: string; state?: string; output?: unknown; errorText?: string; callProviderMetadata?: { chatd?: { messageId?: number } } }[]) {
      if (!p.toolCallId || !pending.has(p.toolCallId)) continue;
      if (p.state === "output-available") results.push({ tool_call_id: p.toolCallId, output: p.output ?? null });
      else if (p.state === "output-error") results.push({ tool_call_id: p.toolCallId, output: p.errorText ?? "error", is_error: true });
      else if (p.state === "output-denied") results.push({ tool_call_id: p.toolCallId, output: "The tool call was denied.", is_error: true });
      callMessageId ??= p.callProviderMetadata?.chatd?.messageId;
    }
    if (results.length === 0) throw new Error(`chatd: the chat is ${chat.status}, with no tool result to send for it`);
    return { kind: "results", chatId, results, callMessageId };
  }

  private tools(): Promise<Schemas["DynamicTool"][]> {
    this.toolDefs ??= Promise.all(
      Object.entries(this.o.tools ?? {}).map(async ([name, t]) => ({
        name,
        ...(t.description ? { description: t.description } : {}),
        input_schema: (await asSchema(t.inputSchema).jsonSchema) as Record<string, unknown>,
      })),
    );
    return this.toolDefs;
  }

  private async format(body: object | undefined): Promise<Schemas["ResponseFormat"] | undefined> {
    const out = body && "output" in body ? (body.output as TransportOutput | null) : this.o.output;
    if (!out) return undefined;
    const schema = { ...((await asSchema(out.schema).jsonSchema) as Record<string, unknown>) };
    return {
      type: "json_schema",
      json_schema: { name: schemaName(out.name), ...(out.description ? { description: out.description } : {}), schema },
    };
  }

  // turn streams a turn as UI message chunks: one assistant message, a UI
  // step per chatd step (a generation the server abandons is taken back
  // with reset-step), and for a structured request the receipt.
  private turn(call: Call, s: Started, messageId: string): ReadableStream<UIMessageChunk> {
    const mode = this.o.partials ?? "transient";
    const metadata: ChatdMessageMetadata = { chatd: { chatId: s.chatId, ...(s.requestId ? { requestId: s.requestId } : {}) } };
    let closed = false;
    return new ReadableStream<UIMessageChunk>({
      start: (c) => {
        const send = (chunk: UIMessageChunk) => {
          if (!closed) c.enqueue(chunk);
        };
        send({ type: "start", messageId, messageMetadata: metadata });
        call
          .follow(s, (p) => chunksOf(p, send, mode, s.chatId), { retract: true })
          .then((out) => this.end(call, s, out, send, metadata))
          .then(() => {
            if (!closed) c.close();
            closed = true;
          })
          .catch((err: unknown) => {
            if (!closed) c.error(err);
            closed = true;
          });
      },
      cancel: () => {
        closed = true;
        call.cancel();
      },
    });
  }

  private async end(call: Call, s: Started, out: Outcome, send: (c: UIMessageChunk) => void, metadata: ChatdMessageMetadata) {
    if (out.type === "failed") {
      send({ type: "error", errorText: out.message });
      return;
    }
    if (out.type === "tool-calls") {
      send({ type: "finish", finishReason: "tool-calls", messageMetadata: metadata });
      return;
    }
    if (!s.requestId) {
      send({ type: "finish", finishReason: "stop", messageMetadata: metadata });
      return;
    }
    let data: ChatdReceiptData;
    let failure: ChatdTurnError | undefined;
    try {
      const r = await call.receipt(s, out);
      data = {
        chatId: s.chatId,
        requestId: s.requestId,
        receiptMessageId: r.messageId,
        status: "succeeded",
        value: r.output.value ?? null,
        attempts: r.rejectedAttempts.length + 1,
        rejectedAttempts: r.rejectedAttempts,
        ...(r.output.usage ? { usage: r.output.usage } : {}),
      };
    } catch (err) {
      if (!ChatdTurnError.isInstance(err)) throw err;
      failure = err;
      data = {
        chatId: s.chatId,
        requestId: s.requestId,
        receiptMessageId: err.receiptMessageId ?? 0,
        status: err.status,
        ...(err.code ? { error: { code: err.code as Schemas["StructuredOutputError"]["code"], message: err.message } } : {}),
        attempts: err.attempts,
        rejectedAttempts: err.rejectedAttempts,
        ...(err.usage ? { usage: err.usage } : {}),
      };
    }
    send({ type: "data-chatd-receipt", id: s.requestId, data } as UIMessageChunk);
    const done: ChatdMessageMetadata = {
      chatd: { ...metadata.chatd, receiptMessageId: data.receiptMessageId, ...(data.usage ? { usage: data.usage } : {}) },
    };
    if (failure) {
      send({ type: "message-metadata", messageMetadata: done });
      send({ type: "error", errorText: failure.message });
      return;
    }
    const id = `receipt-${data.receiptMessageId}`;
    send({ type: "text-start", id });
    send({ type: "text-delta", id, delta: JSON.stringify(data.value) });
    send({ type: "text-end", id });
    send({ type: "finish", finishReason: "stop", messageMetadata: done });
  }
}

/** A useChat transport over chatd: `useChat({ transport: createChatdTransport({ baseURL, token }) })`. */
export function createChatdTransport<M extends UIMessage = UIMessage>(o: ChatdTransportOptions): ChatdChatTransport<M> {
  return new ChatdChatTransport<M>(o);
}

function chunksOf(p: Piece, send: (c: UIMessageChunk) => void, partials: "transient" | "part" | "off", chatId: string) {
  const server = (x: { server: boolean }) => (x.server ? { providerExecuted: true, dynamic: true } : {});
  switch (p.type) {
    case "step-start":
      return send({ type: "start-step" });
    case "step-reset":
      return send({ type: "reset-step" });
    case "step-end":
      return send({ type: "finish-step" });
    case "block-start":
      return send(
        p.kind === "text"
          ? { type: "text-start", id: p.id }
          : { type: "reasoning-start", id: p.id, ...(p.kind === "prose" ? { providerMetadata: { chatd: { prose: true } } } : {}) },
      );
    case "block-delta":
      return send({ type: p.kind === "text" ? "text-delta" : "reasoning-delta", id: p.id, delta: p.delta });
    case "block-end":
      return send({ type: p.kind === "text" ? "text-end" : "reasoning-end", id: p.id });
    case "tool-input-start":
      return send({ type: "tool-input-start", toolCallId: p.id, toolName: p.toolName, ...server(p) });
    case "tool-input-delta":
      return send({ type: "tool-input-delta", toolCallId: p.id, inputTextDelta: p.delta });
    case "tool-input-end":
      return;
    case "tool-call":
      return send({
        type: "tool-input-available",
        toolCallId: p.id,
        toolName: p.toolName,
        input: p.args,
        ...server(p),
        providerMetadata: { chatd: { chatId, ...(p.messageId !== undefined ? { messageId: p.messageId } : {}) } },
      });
    case "tool-result":
      return send(
        p.isError
          ? { type: "tool-output-error", toolCallId: p.id, errorText: typeof p.result === "string" ? p.result : JSON.stringify(p.result), providerExecuted: true, dynamic: true }
          : { type: "tool-output-available", toolCallId: p.id, output: p.result, providerExecuted: true, dynamic: true },
      );
    case "source":
      return send({ type: "source-url", sourceId: p.id, url: p.url, ...(p.title ? { title: p.title } : {}) });
    case "partial": {
      if (partials === "off") return;
      const data: ChatdPartialData = { requestId: p.requestId, value: p.value, restarted: p.restarted };
      return send({ type: "data-chatd-partial", id: p.requestId, data, ...(partials === "transient" ? { transient: true } : {}) } as UIMessageChunk);
    }
  }
}

// chatOf finds the chatd chat in the metadata of the latest assistant message.
function chatOf(messages: UIMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const md = messages[i]?.metadata as Partial<ChatdMessageMetadata> | undefined;
    if (messages[i]?.role === "assistant" && typeof md?.chatd?.chatId === "string") return md.chatd.chatId;
  }
  return undefined;
}

// lastChatdMessage is the newest chatd message id the UI messages know of
// (where a stream opened before a send may start).
function lastChatdMessage(messages: UIMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    const md = messages[i]?.metadata as Partial<ChatdMessageMetadata> | undefined;
    if (md?.chatd?.receiptMessageId) return md.chatd.receiptMessageId;
  }
  return 0;
}

// newUserContent is the text of the user messages after the last
// assistant message, as one chatd message.
function newUserContent(messages: UIMessage[]): Schemas["TextPart"][] {
  let i = messages.length;
  while (i > 0 && messages[i - 1]?.role === "user") i--;
  const content: Schemas["TextPart"][] = [];
  for (const m of messages.slice(i)) {
    for (const p of m.parts) {
      if (p.type === "text") content.push({ type: "text", text: p.text });
      else if (p.type === "file") throw new Error("chatd: messages take text parts only (a file part was given)");
    }
  }
  if (content.length === 0) throw new Error("chatd: there is no user text to send");
  return content;
}

async function lastUserMessage(client: ChatdClient, chatId: string): Promise<Schemas["ChatMessage"] | undefined> {
  let after = 0;
  let found: Schemas["ChatMessage"] | undefined;
  for (;;) {
    const page = await client.listMessages(chatId, { afterId: after, limit: 1000 });
    for (const m of page.messages) if (m.role === "user") found = m;
    const last = page.messages[page.messages.length - 1];
    if (!page.has_more || !last) return found;
    after = last.id;
  }
}
