import {
  InvalidPromptError,
  UnsupportedFunctionalityError,
  type JSONObject,
  type LanguageModelV4CallOptions,
  type LanguageModelV4Message,
  type LanguageModelV4Prompt,
  type LanguageModelV4ToolResultOutput,
  type SharedV4Warning,
} from "@ai-sdk/provider";
import type { CreateChatRequest, Schemas, SendMessageRequest } from "@chatd/client";

/** What a call asks chatd to do. */
export type Action =
  | { kind: "create"; body: CreateChatRequest; idempotencyKey: string }
  | { kind: "send"; chatId: string; body: SendMessageRequest; idempotencyKey: string; afterHint: number }
  | { kind: "results"; chatId: string; results: Schemas["ToolResult"][]; callMessageId: number | undefined }
  | { kind: "edit"; chatId: string; messageId: number; body: Schemas["EditMessageRequest"] };

export interface Plan {
  action: Action;
  /** The turn answers a structured request (its value is the step's text). */
  structured: boolean;
  /** The running request a tool-results call continues. */
  requestId: string | undefined;
  clientTools: Set<string>;
  warnings: SharedV4Warning[];
  toolsDigest: string;
  systemDigest: string;
}

/** The chatd metadata earlier steps left on their parts (providerMetadata.chatd, back as providerOptions.chatd). */
interface Ref {
  chatId: string;
  requestId?: string;
  messageId?: number;
  toolsDigest?: string;
  systemDigest?: string;
}

/** providerOptions.chatd of a call. */
export interface ChatdCallOptions {
  /** Continue this chat: the call sends only the new user messages. */
  chatId?: string;
  /** The Idempotency-Key of the call's create or send (default: one per logical call, reused by its retries). */
  idempotencyKey?: string;
  /** The title of a new chat. */
  title?: string;
  /** MCP servers a new chat opts into (the operator's names). */
  mcpServers?: string[];
  /** Digests chatd's metadata carries; passed back, they let a continuation check its tools and system prompt. */
  toolsDigest?: string;
  systemDigest?: string;
}

const unsupportedSettings = [
  "maxOutputTokens",
  "temperature",
  "stopSequences",
  "topP",
  "topK",
  "presencePenalty",
  "frequencyPenalty",
  "seed",
] as const;

// A key per logical call: the AI SDK retries a model call with the same
// prompt array, so its retries reuse the key.
const keys = new WeakMap<object, string>();

/** Turns a call into the chatd request it makes, or refuses a prompt chatd cannot represent faithfully. */
export function plan(o: LanguageModelV4CallOptions, modelId: string): Plan {
  const opts = callOptions(o.providerOptions?.["chatd"]);
  const warnings: SharedV4Warning[] = [];
  for (const s of unsupportedSettings) {
    if (o[s] !== undefined) warnings.push({ type: "unsupported", feature: s, details: "chatd's model configuration decides it" });
  }
  if (o.toolChoice && o.toolChoice.type !== "auto") {
    warnings.push({ type: "unsupported", feature: "toolChoice", details: "chatd's agent chooses its tools (auto)" });
  }
  if (o.reasoning !== undefined && o.reasoning !== "provider-default") {
    warnings.push({ type: "unsupported", feature: "reasoning", details: "chatd's model configuration decides it" });
  }
  const tools: Schemas["DynamicTool"][] = [];
  for (const t of o.tools ?? []) {
    if (t.type !== "function") {
      warnings.push({ type: "unsupported", feature: `provider tool ${t.name}`, details: "chatd runs its own server and MCP tools" });
      continue;
    }
    tools.push({ name: t.name, ...(t.description ? { description: t.description } : {}), input_schema: t.inputSchema as Record<string, unknown> });
  }
  const clientTools = new Set(tools.map((t) => t.name));
  const toolsDigest = digest(tools);
  const { system, rest } = leadingSystem(o.prompt);
  const systemDigest = digest(system ?? "");

  const ref = promptRef(o.prompt);
  if (opts.chatId && ref && ref.chatId !== opts.chatId) {
    throw new InvalidPromptError({
      prompt: o.prompt,
      message: `providerOptions.chatd.chatId (${opts.chatId}) is not the chat of the prompt's earlier steps (${ref.chatId})`,
    });
  }
  const chatId = opts.chatId ?? ref?.chatId;
  const last = lastIndex(rest, (m) => m.role === "assistant" || m.role === "tool");
  const tail = rest.slice(last + 1);
  const json = o.responseFormat?.type === "json" ? o.responseFormat : undefined;
  const base = { clientTools, warnings, toolsDigest, systemDigest };

  if (chatId !== undefined && rest[rest.length - 1]?.role === "tool") {
    const results = toolResults(o.prompt, rest);
    checkContinued(warnings, tools.length > 0, toolsDigest, opts.toolsDigest ?? ref?.toolsDigest, "tools", "tool-results");
    if (json && ref?.requestId === undefined) {
      warnings.push({ type: "other", message: "chatd: the turn these tool results continue asked for no structured output; the step returns text" });
    }
    return {
      ...base,
      action: { kind: "results", chatId, results, callMessageId: ref?.messageId },
      structured: ref?.requestId !== undefined,
      requestId: ref?.requestId,
    };
  }

  const content = userContent(o.prompt, tail);
  const response_format = json
    ? {
        type: "json_schema" as const,
        json_schema: {
          name: schemaName(json.name),
          ...(json.description ? { description: json.description } : {}),
          schema: (json.schema ?? {}) as Record<string, unknown>,
        },
      }
    : undefined;
  const idempotencyKey = opts.idempotencyKey ?? keyFor(o.prompt);
  if (chatId !== undefined) {
    checkContinued(warnings, tools.length > 0, toolsDigest, opts.toolsDigest ?? ref?.toolsDigest, "tools", "continued chat");
    checkContinued(warnings, system !== undefined, systemDigest, opts.systemDigest ?? ref?.systemDigest, "system prompt", "continued chat");
    return {
      ...base,
      action: { kind: "send", chatId, body: { content, ...(response_format ? { response_format } : {}) }, idempotencyKey, afterHint: ref?.messageId ?? 0 },
      structured: json !== undefined,
      requestId: undefined,
    };
  }
  if (last >= 0) {
    throw new InvalidPromptError({
      prompt: o.prompt,
      message:
        "chatd: a new chat starts from system and user messages only, and this prompt has earlier assistant or tool messages " +
        "that did not come from chatd; to continue a chatd chat, pass providerOptions.chatd.chatId or the messages of its earlier steps",
    });
  }
  const body: CreateChatRequest = {
    content,
    ...(modelId ? { model: modelId } : {}),
    ...(system !== undefined ? { system_prompt: system } : {}),
    ...(response_format ? { response_format } : {}),
    ...(tools.length > 0 ? { dynamic_tools: tools } : {}),
    ...(opts.title !== undefined ? { title: opts.title } : {}),
    ...(opts.mcpServers !== undefined ? { mcp_servers: opts.mcpServers } : {}),
  };
  return { ...base, action: { kind: "create", body, idempotencyKey }, structured: json !== undefined, requestId: undefined };
}

function callOptions(v: JSONObject | undefined): ChatdCallOptions {
  const o: ChatdCallOptions = {};
  if (!v) return o;
  const str = (k: keyof ChatdCallOptions) => {
    const x = v[k];
    if (x === undefined) return undefined;
    if (typeof x !== "string" || x === "") throw new InvalidPromptError({ prompt: v, message: `providerOptions.chatd.${k} must be a non-empty string` });
    return x;
  };
  const set = <K extends keyof ChatdCallOptions>(k: K, x: ChatdCallOptions[K] | undefined) => {
    if (x !== undefined) o[k] = x;
  };
  set("chatId", str("chatId"));
  set("idempotencyKey", str("idempotencyKey"));
  set("title", str("title"));
  set("toolsDigest", str("toolsDigest"));
  set("systemDigest", str("systemDigest"));
  const mcp = v["mcpServers"];
  if (mcp !== undefined) {
    if (!Array.isArray(mcp) || !mcp.every((s) => typeof s === "string")) {
      throw new InvalidPromptError({ prompt: v, message: "providerOptions.chatd.mcpServers must be an array of strings" });
    }
    o.mcpServers = mcp as string[];
  }
  return o;
}

// leadingSystem splits off the system messages that open the prompt: they
// become the chat's system_prompt (joined by a blank line).
function leadingSystem(prompt: LanguageModelV4Prompt): { system: string | undefined; rest: LanguageModelV4Message[] } {
  let i = 0;
  const parts: string[] = [];
  for (; i < prompt.length && prompt[i]?.role === "system"; i++) parts.push((prompt[i] as { content: string }).content);
  const rest = prompt.slice(i);
  if (rest.some((m) => m.role === "system")) {
    throw new InvalidPromptError({ prompt, message: "chatd: system messages must open the prompt; chatd has no system message within a conversation" });
  }
  return { system: parts.length > 0 ? parts.join("\n\n") : undefined, rest };
}

// promptRef finds the chatd chat of the prompt's latest step: the metadata
// chatd left on an assistant message's parts.
function promptRef(prompt: LanguageModelV4Prompt): Ref | undefined {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i];
    if (m?.role !== "assistant") continue;
    for (let j = m.content.length - 1; j >= 0; j--) {
      const r = refOf(m.content[j]?.providerOptions?.["chatd"]);
      if (r) return r;
    }
    const r = refOf(m.providerOptions?.["chatd"]);
    if (r) return r;
  }
  return undefined;
}

function refOf(v: JSONObject | undefined): Ref | undefined {
  if (!v || typeof v["chatId"] !== "string") return undefined;
  const r: Ref = { chatId: v["chatId"] };
  if (typeof v["requestId"] === "string") r.requestId = v["requestId"];
  if (typeof v["messageId"] === "number") r.messageId = v["messageId"];
  if (typeof v["toolsDigest"] === "string") r.toolsDigest = v["toolsDigest"];
  if (typeof v["systemDigest"] === "string") r.systemDigest = v["systemDigest"];
  return r;
}

// toolResults collects the results that answer the client tool calls of
// the last assistant message.
function toolResults(prompt: LanguageModelV4Prompt, rest: LanguageModelV4Message[]): Schemas["ToolResult"][] {
  const a = lastIndex(rest, (m) => m.role === "assistant");
  const calls = new Set<string>();
  for (const p of a >= 0 ? (rest[a] as { content: { type: string; toolCallId?: string; providerExecuted?: boolean }[] }).content : []) {
    if (p.type === "tool-call" && !p.providerExecuted && p.toolCallId) calls.add(p.toolCallId);
  }
  const results: Schemas["ToolResult"][] = [];
  for (const m of rest.slice(a + 1)) {
    if (m.role !== "tool") {
      throw new InvalidPromptError({ prompt, message: "chatd: tool results must be the last messages of the prompt (chatd queues a user message as a new turn)" });
    }
    for (const p of m.content) {
      if (p.type !== "tool-result") continue;
      if (!calls.has(p.toolCallId)) {
        throw new InvalidPromptError({ prompt, message: `chatd: the tool result for ${p.toolCallId} answers no client tool call of the chat's last step` });
      }
      results.push(result(p.toolCallId, p.output));
    }
  }
  if (results.length === 0) throw new InvalidPromptError({ prompt, message: "chatd: the prompt ends with a tool message without tool results" });
  return results;
}

function result(id: string, out: LanguageModelV4ToolResultOutput): Schemas["ToolResult"] {
  switch (out.type) {
    case "text":
    case "json":
      return { tool_call_id: id, output: out.value };
    case "error-text":
    case "error-json":
      return { tool_call_id: id, output: out.value, is_error: true };
    case "execution-denied":
      return { tool_call_id: id, output: out.reason ?? "The tool call was denied.", is_error: true };
    case "content":
      if (out.value.every((c) => c.type === "text")) return { tool_call_id: id, output: out.value.map((c) => ({ type: "text", text: c.text })) };
      throw new UnsupportedFunctionalityError({ functionality: "file content in tool results", message: "chatd: tool results carry JSON, not files" });
  }
}

// userContent is the new user content: the user messages of the tail, as
// one chatd message (text parts in order).
function userContent(prompt: LanguageModelV4Prompt, tail: LanguageModelV4Message[]): Schemas["TextPart"][] {
  const content: Schemas["TextPart"][] = [];
  for (const m of tail) {
    if (m.role !== "user") continue;
    for (const p of m.content) {
      if (p.type !== "text") {
        throw new UnsupportedFunctionalityError({ functionality: "file parts", message: "chatd: messages take text parts only" });
      }
      content.push({ type: "text", text: p.text });
    }
  }
  if (content.length === 0) {
    throw new InvalidPromptError({ prompt, message: "chatd: the prompt has no new user message to send (it must end with user messages or tool results)" });
  }
  return content;
}

function checkContinued(warnings: SharedV4Warning[], given: boolean, now: string, before: string | undefined, what: string, where: string) {
  if (before === undefined ? given : before !== now) {
    warnings.push({
      type: "other",
      message: `chatd: a chat keeps the ${what} it was created with; the ${what} of this call ${before === undefined ? "could not be compared with them" : "differ from them"} and were not sent (${where})`,
    });
  }
}

function keyFor(prompt: object): string {
  let k = keys.get(prompt);
  if (!k) {
    k = crypto.randomUUID();
    keys.set(prompt, k);
  }
  return k;
}

/** A response_format name for chatd (^[A-Za-z0-9_-]{1,64}$): Output.object sends none. */
export function schemaName(name: string | undefined): string {
  const s = (name ?? "").replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
  return s === "" ? "output" : s;
}

function lastIndex<T>(xs: T[], f: (x: T) => boolean): number {
  for (let i = xs.length - 1; i >= 0; i--) if (f(xs[i] as T)) return i;
  return -1;
}

/** A short digest of a JSON value (FNV-1a of its canonical form): tells a change, not a secret. */
export function digest(v: unknown): string {
  let h = 0x811c9dc5;
  for (const ch of canonical(v)) {
    h ^= ch.codePointAt(0) ?? 0;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}
