import type {
  JSONObject,
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4FinishReason,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  SharedV4ProviderMetadata,
} from "@ai-sdk/provider";
import type { ChatdClient, Usage } from "@chatd/client";
import { Call, type Receipt, type Started } from "./call.js";
import { plan, type Plan } from "./prompt.js";
import { addUsage, type Kind, type Outcome, type Piece } from "./turn.js";
import { usageV4 } from "./usage.js";

/**
 * chatd as an AI SDK language model. Each call is a chatd turn: the first
 * creates a chat, later ones continue it (providerOptions.chatd.chatId, or
 * the chatd metadata of earlier steps in the prompt). With a JSON response
 * format the turn is a structured request, and the step's only text is the
 * value of its committed receipt.
 */
export class ChatdLanguageModel implements LanguageModelV4 {
  readonly specificationVersion = "v4" as const;
  readonly provider = "chatd";
  readonly supportedUrls = {};

  constructor(
    readonly modelId: string,
    private readonly client: () => ChatdClient,
  ) {}

  async doGenerate(o: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
    const p = plan(o, this.modelId);
    const call = this.call(p, o);
    const s = await this.start(call, p);
    const b = new Builder(s, p);
    const out = await call.follow(s, (piece) => b.piece(piece));
    const end = await b.end(call, out);
    return {
      content: b.content,
      ...(end.receipt ? { structuredOutputText: end.text } : {}),
      finishReason: end.finishReason,
      usage: usageV4(b.usage),
      providerMetadata: b.metadata(end.receipt),
      request: { body: requestBody(p) },
      response: { id: s.requestId ?? `${s.chatId}/${b.lastMessage ?? s.afterId}`, timestamp: new Date(), modelId: s.model ?? this.modelId },
      warnings: p.warnings,
    };
  }

  async doStream(o: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
    const p = plan(o, this.modelId);
    const call = this.call(p, o);
    const s = await this.start(call, p);
    const b = new Builder(s, p);
    let closed = false;
    const stream = new ReadableStream<LanguageModelV4StreamPart>({
      start: (c) => {
        const send = (part: LanguageModelV4StreamPart) => {
          if (!closed) c.enqueue(part);
        };
        send({ type: "stream-start", warnings: p.warnings });
        send({ type: "response-metadata", id: s.requestId ?? `${s.chatId}/${s.afterId}`, timestamp: new Date(), modelId: s.model ?? this.modelId });
        const tap = o.includeRawChunks ? (ev: unknown) => send({ type: "raw", rawValue: ev }) : undefined;
        call
          .follow(s, (piece) => b.stream(piece, send), tap ? { tap } : {})
          .then((out) => b.end(call, out))
          .then((end) => {
            if (end.receipt) {
              const id = `receipt-${end.receipt.messageId}`;
              const providerMetadata = b.meta({ receiptMessageId: end.receipt.messageId });
              send({ type: "text-start", id, providerMetadata });
              send({ type: "text-delta", id, delta: end.text });
              send({ type: "text-end", id });
            }
            send({ type: "finish", usage: usageV4(b.usage), finishReason: end.finishReason, providerMetadata: b.metadata(end.receipt) });
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
    return { stream, request: { body: requestBody(p) } };
  }

  private call(p: Plan, o: LanguageModelV4CallOptions): Call {
    const call = new Call(this.client(), o.abortSignal);
    call.clientTools = p.clientTools;
    return call;
  }

  private async start(call: Call, p: Plan): Promise<Started> {
    const s = await call.write(p.action);
    if (s.requestId === undefined && p.requestId !== undefined) s.requestId = p.requestId;
    return s;
  }
}

interface End {
  finishReason: LanguageModelV4FinishReason;
  receipt?: Receipt;
  text: string;
}

// Builder gathers a call's content and usage from the turn's pieces.
class Builder {
  readonly content: LanguageModelV4Content[] = [];
  usage: Usage | undefined;
  lastMessage: number | undefined;
  private readonly texts = new Map<string, { text: string }>();

  constructor(
    private readonly s: Started,
    private readonly p: Plan,
  ) {}

  /** The chatd metadata every part and step carries. */
  meta(extra: JSONObject = {}): SharedV4ProviderMetadata {
    return {
      chatd: {
        chatId: this.s.chatId,
        ...(this.s.requestId !== undefined ? { requestId: this.s.requestId } : {}),
        toolsDigest: this.p.toolsDigest,
        systemDigest: this.p.systemDigest,
        ...extra,
      },
    };
  }

  /** The step's metadata: a structured request's receipt, attempts and usage. */
  metadata(r: Receipt | undefined): SharedV4ProviderMetadata {
    const extra: JSONObject = {};
    if (this.lastMessage !== undefined) extra["messageId"] = this.lastMessage;
    if (r) {
      extra["receiptMessageId"] = r.messageId;
      // Finalization attempts: the rejected ones and the accepted one.
      extra["attempts"] = r.rejectedAttempts.length + 1;
      extra["rejectedAttempts"] = r.rejectedAttempts as unknown as JSONObject[];
      if (r.output.usage) extra["usage"] = { ...r.output.usage };
    }
    return this.meta(extra);
  }

  piece(p: Piece) {
    switch (p.type) {
      case "block-start": {
        const part = { type: p.kind === "text" ? ("text" as const) : ("reasoning" as const), text: "", providerMetadata: this.blockMeta(p.kind) };
        this.content.push(part);
        this.texts.set(p.id, part);
        break;
      }
      case "block-delta": {
        const t = this.texts.get(p.id);
        if (t) t.text += p.delta;
        break;
      }
      case "tool-call":
        this.content.push({
          type: "tool-call",
          toolCallId: p.id,
          toolName: p.toolName,
          input: JSON.stringify(p.args ?? {}),
          ...(p.server ? { providerExecuted: true, dynamic: true } : {}),
          providerMetadata: this.meta(p.messageId !== undefined ? { messageId: p.messageId } : {}),
        });
        break;
      case "tool-result":
        this.content.push({
          type: "tool-result",
          toolCallId: p.id,
          toolName: p.toolName,
          result: (p.result ?? {}) as NonNullable<JSONObject>,
          ...(p.isError ? { isError: true } : {}),
          dynamic: true,
          providerMetadata: this.meta(),
        });
        break;
      case "source":
        this.content.push({ type: "source", sourceType: "url", id: p.id, url: p.url, ...(p.title ? { title: p.title } : {}), providerMetadata: this.meta() });
        break;
      case "step-end":
        this.step(p);
        break;
    }
  }

  stream(p: Piece, send: (part: LanguageModelV4StreamPart) => void) {
    switch (p.type) {
      case "block-start":
        send({ type: p.kind === "text" ? "text-start" : "reasoning-start", id: p.id, providerMetadata: this.blockMeta(p.kind) });
        break;
      case "block-delta":
        send({ type: p.kind === "text" ? "text-delta" : "reasoning-delta", id: p.id, delta: p.delta });
        break;
      case "block-end":
        send({ type: p.kind === "text" ? "text-end" : "reasoning-end", id: p.id });
        break;
      case "tool-input-start":
        send({ type: "tool-input-start", id: p.id, toolName: p.toolName, ...(p.server ? { providerExecuted: true, dynamic: true } : {}) });
        break;
      case "tool-input-delta":
        send({ type: "tool-input-delta", id: p.id, delta: p.delta });
        break;
      case "tool-input-end":
        send({ type: "tool-input-end", id: p.id });
        break;
      case "step-end":
        this.step(p);
        break;
      default: {
        const before = this.content.length;
        this.piece(p);
        for (const part of this.content.slice(before)) send(part as LanguageModelV4StreamPart);
      }
    }
  }

  private step(p: Extract<Piece, { type: "step-end" }>) {
    if (!p.message) return;
    this.usage = addUsage(this.usage, p.message.usage);
    this.lastMessage = p.message.id;
  }

  // Prose of a structured turn is shown as reasoning, marked as text.
  private blockMeta(kind: Kind): SharedV4ProviderMetadata {
    return this.meta(kind === "prose" ? { prose: true } : {});
  }

  /** Ends the call: the receipt's value as the step's text, or the finish reason of an ordinary step. */
  async end(call: Call, out: Outcome): Promise<End> {
    if (out.type === "failed") throw call.failed(this.s, out, this.usage);
    if (out.type === "tool-calls") return { finishReason: { unified: "tool-calls", raw: "requires_action" }, text: "" };
    if (this.s.requestId === undefined) return { finishReason: { unified: "stop", raw: "waiting" }, text: "" };
    const receipt = await call.receipt(this.s, out);
    const text = JSON.stringify(receipt.output.value ?? null);
    this.content.push({ type: "text", text, providerMetadata: this.meta({ receiptMessageId: receipt.messageId }) });
    return { finishReason: { unified: "stop", raw: "receipt" }, receipt, text };
  }
}

function requestBody(p: Plan): unknown {
  const a = p.action;
  return a.kind === "results" ? { results: a.results } : a.body;
}
