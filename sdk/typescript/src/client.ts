import type { components } from "./schema.js";
import { ChatdError, errorOf, sleep, type ErrorBody } from "./errors.js";
import { readStream, type StreamEvent, type StreamOptions, type WatchEvent } from "./sse.js";
import { partials, type PartialEvent, type Parser } from "./partials.js";

export type { Parser } from "./partials.js";

export { ChatdError, type ErrorBody };

/** The wire types, generated from the server's OpenAPI document. */
export type Schemas = components["schemas"];
export type Chat = Schemas["Chat"];
export type ChatMessage = Schemas["ChatMessage"];
export type MessagePart = Schemas["MessagePart"];
export type CreateChatRequest = Schemas["CreateChatRequest"];
export type CreateChatResponse = Schemas["CreateChatResponse"];
export type SendMessageRequest = Schemas["SendMessageRequest"];
export type SendMessageResponse = Schemas["SendMessageResponse"];
export type StructuredOutputResult = Schemas["StructuredOutputResult"];
export type StructuredOutputError = Schemas["StructuredOutputError"];
/** Tokens of provider steps by kind; null: the provider did not report that figure (not zero). */
export type Usage = Schemas["Usage"];
/** A rejected attempt at a structured result, with why (a failed receipt's error.attempts, and the lookup's attempts). */
export type Attempt = Schemas["Attempt"];
export type AttemptError = Schemas["AttemptError"];
/** Something in a response_format schema that chatd admitted but does not check (create/send/edit `warnings`). */
export type SchemaWarning = Schemas["SchemaWarning"];

/** A token, or a function that returns the current one (called before every request and stream connection). */
export type TokenSource = string | (() => string | Promise<string>);

/** The token API's wire types. */
export type Token = Schemas["Token"];
export type CreateTokenRequest = Schemas["CreateTokenRequest"];
export type CreateTokenResponse = Schemas["CreateTokenResponse"];
export type User = Schemas["User"];

/** What deleting a chat removed, and what erasing a user removed. */
export type DeleteChatResponse = Schemas["DeleteChatResponse"];
export type ErasureReport = Schemas["ErasureReport"];
/**
 * One line of an export (docs/operations.md#export-and-import): its `type`
 * is `chatd_export` (the header), `chat`, `structured_request`, `message`,
 * `queued_message` or `end` (the last, counting the others).
 */
export type ExportLine = { type: string } & Record<string, unknown>;

export interface ClientOptions {
  /** The server, e.g. http://127.0.0.1:8080. */
  baseUrl: string;
  /**
   * An API token (`chatd token create --user NAME`), or a function that
   * returns the current JWT of the app's identity provider: wrap your
   * provider's token getter in jwtSource to have it refreshed before it expires.
   */
  token: TokenSource;
  /** Act for this user (X-Chatd-User): the token needs the act-as capability (docs/operations.md#identity). */
  actAs?: string;
  /** Attempts of a retried call (default 4): creates, sends and reads are retried on 503 and connection errors. */
  attempts?: number;
  /** The first backoff in ms (default 250), doubled per attempt unless the server sends Retry-After. */
  backoffMs?: number;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface WriteOptions extends CallOptions {
  /** Idempotency-Key of a create or send; default: a fresh UUID per call, reused by its retries. */
  idempotencyKey?: string;
}

/** A terminal structured result; value is typed by the parser given. */
export type StructuredResult<T> =
  | (Omit<StructuredOutputResult, "status" | "value" | "error"> & { status: "succeeded"; value: T })
  | (Omit<StructuredOutputResult, "status" | "value" | "error"> & {
      status: "failed" | "cancelled";
      error: StructuredOutputError;
    });

/** The chatd HTTP API. */
export class ChatdClient {
  readonly baseUrl: string;
  private readonly token: TokenSource;
  private readonly actAs: string | undefined;
  private readonly attempts: number;
  private readonly backoffMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(o: ClientOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    this.token = o.token;
    this.actAs = o.actAs;
    this.attempts = o.attempts ?? 4;
    this.backoffMs = o.backoffMs ?? 250;
    this.fetchImpl = o.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Creates a chat with its first message; retried safely with one Idempotency-Key. */
  createChat(req: CreateChatRequest, o: WriteOptions = {}): Promise<CreateChatResponse> {
    return this.call("POST", "/api/v1/chats", req, o, o.idempotencyKey ?? newKey());
  }

  /** Sends a message (queued while a turn runs); retried safely with one Idempotency-Key. */
  send(chat: string, req: SendMessageRequest, o: WriteOptions = {}): Promise<SendMessageResponse> {
    return this.call("POST", `/api/v1/chats/${enc(chat)}/messages`, req, o, o.idempotencyKey ?? newKey());
  }

  getChat(chat: string, o: CallOptions = {}): Promise<Chat> {
    return this.call("GET", `/api/v1/chats/${enc(chat)}`, undefined, o);
  }

  listChats(q: { limit?: number; cursor?: string; parentChatId?: string } = {}, o: CallOptions = {}): Promise<Schemas["ListChatsResponse"]> {
    return this.call("GET", `/api/v1/chats${query({ limit: q.limit, cursor: q.cursor, parent_chat_id: q.parentChatId })}`, undefined, o);
  }

  listMessages(chat: string, q: { afterId?: number; limit?: number } = {}, o: CallOptions = {}): Promise<Schemas["ListMessagesResponse"]> {
    return this.call("GET", `/api/v1/chats/${enc(chat)}/messages${query({ after_id: q.afterId, limit: q.limit })}`, undefined, o);
  }

  updateChat(chat: string, req: Schemas["UpdateChatRequest"], o: CallOptions = {}): Promise<Chat> {
    return this.call("PATCH", `/api/v1/chats/${enc(chat)}`, req, o);
  }

  editMessage(chat: string, message: number, req: Schemas["EditMessageRequest"], o: CallOptions = {}): Promise<Schemas["EditMessageResponse"]> {
    return this.call("PATCH", `/api/v1/chats/${enc(chat)}/messages/${message}`, req, o);
  }

  deleteQueued(chat: string, queued: number, o: CallOptions = {}): Promise<Schemas["DeleteQueuedResponse"]> {
    return this.call("DELETE", `/api/v1/chats/${enc(chat)}/queue/${queued}`, undefined, o);
  }

  /**
   * Deletes a chat and its child chats: a running turn stops, pending
   * structured requests get their cancelled receipt (chat_deleted), then the
   * content goes. Deleting it again is a 404 (ChatdError) saying when and why.
   */
  deleteChat(chat: string, o: CallOptions = {}): Promise<DeleteChatResponse> {
    return this.call("DELETE", `/api/v1/chats/${enc(chat)}`, undefined, o);
  }

  /** The export of a chat and its child chats, line by line (JSON Lines that `chatd import` reads). */
  exportChat(chat: string, o: CallOptions = {}): AsyncGenerator<ExportLine> {
    return this.lines(`/api/v1/chats/${enc(chat)}/export`, o);
  }

  interrupt(chat: string, o: CallOptions = {}): Promise<Chat> {
    return this.call("POST", `/api/v1/chats/${enc(chat)}/interrupt`, undefined, o);
  }

  compact(chat: string, o: CallOptions = {}): Promise<Chat> {
    return this.call("POST", `/api/v1/chats/${enc(chat)}/compact`, undefined, o);
  }

  submitToolResults(chat: string, req: Schemas["ToolResultsRequest"], o: CallOptions = {}): Promise<Schemas["ToolResultsResponse"]> {
    return this.call("POST", `/api/v1/chats/${enc(chat)}/tool-results`, req, o);
  }

  /** Looks a structured request up; with waitSeconds the server holds a pending one (at most 60 s). */
  getStructuredOutput(requestId: string, q: { waitSeconds?: number } = {}, o: CallOptions = {}): Promise<StructuredOutputResult> {
    const wait = q.waitSeconds ? `${q.waitSeconds}s` : undefined;
    return this.call("GET", `/api/v1/structured-outputs/${enc(requestId)}${query({ wait })}`, undefined, o);
  }

  /**
   * Long-polls until the request is terminal. With schema (a zod schema or
   * any { parse }), a succeeded value is parsed, and typed, by it.
   */
  async waitStructuredOutput<T = unknown>(requestId: string, o: CallOptions & { schema?: Parser<T> } = {}): Promise<StructuredResult<T>> {
    for (;;) {
      const res = await this.getStructuredOutput(requestId, { waitSeconds: 30 }, o);
      switch (res.status) {
        case "pending":
          continue;
        case "succeeded": {
          const value = o.schema ? o.schema.parse(res.value) : (res.value as T);
          return { ...res, status: "succeeded", value };
        }
        default:
          if (!res.error) throw new Error(`chatd: request ${requestId} is ${res.status} without an error`);
          return { ...res, status: res.status, error: res.error };
      }
    }
  }

  /** A single-use ticket to open the chat's stream without the Authorization header (60 s). */
  createStreamTicket(chat: string, o: CallOptions = {}): Promise<Schemas["StreamTicket"]> {
    return this.call("POST", `/api/v1/chats/${enc(chat)}/stream-ticket`, undefined, o);
  }

  /**
   * The URL of the chat's stream with a fresh ticket, for a browser's
   * EventSource (which cannot send headers). A ticket works once: to
   * reconnect, ask for a new URL with `after` set to the EventSource's
   * last `lastEventId` (it resumes the running step's preview too), or
   * afterId to a message id.
   */
  async eventSourceUrl(chat: string, q: { afterId?: number; after?: string } = {}, o: CallOptions = {}): Promise<string> {
    const { ticket } = await this.createStreamTicket(chat, o);
    return `${this.baseUrl}/api/v1/chats/${enc(chat)}/stream${query({ after_id: q.afterId, after: q.after, ticket })}`;
  }

  /** Follows a chat live: typed events, resumed with Last-Event-ID after a dropped connection. */
  stream(chat: string, o: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    return readStream<StreamEvent>(this.streamInit(), `${this.baseUrl}/api/v1/chats/${enc(chat)}/stream`, o);
  }

  /**
   * The partial values of a structured request while the model writes
   * them, typed by schema (a zod schema, or any { parse }: it types the
   * partials, and parses the receipt's value), then its receipt. Opens the
   * chat's stream (or pass your own to the `partials` function); called any
   * time before the receipt, it yields every partial value from the first.
   */
  partials<T = unknown>(chat: string, requestId: string, o: StreamOptions & { schema?: Parser<T> } = {}): AsyncGenerator<PartialEvent<T>> {
    return partials<T>(this.stream(chat, o), requestId, o);
  }

  /** Follows every chat of the caller: a `chat` event per chat, then one per change. */
  watch(o: StreamOptions = {}): AsyncGenerator<WatchEvent> {
    return readStream<WatchEvent>(this.streamInit(), `${this.baseUrl}/api/v1/chats/watch`, o);
  }

  /** Creates an API token (admin scope): the secret is in this answer only. */
  createToken(req: CreateTokenRequest, o: CallOptions = {}): Promise<CreateTokenResponse> {
    return this.call("POST", "/api/v1/tokens", req, o);
  }

  /** Lists every token, or one user's (admin scope); never a secret. */
  listTokens(q: { user?: string } = {}, o: CallOptions = {}): Promise<Schemas["ListTokensResponse"]> {
    return this.call("GET", `/api/v1/tokens${query({ user: q.user })}`, undefined, o);
  }

  /** Revokes a token by its id (admin scope): every replica refuses it, and ends its streams, within 5 s. */
  async revokeToken(id: string, o: CallOptions = {}): Promise<void> {
    await this.call("DELETE", `/api/v1/tokens/${enc(id)}`, undefined, o);
  }

  /** Lists users by name, a page at a time (admin scope). */
  listUsers(q: { limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<Schemas["ListUsersResponse"]> {
    return this.call("GET", `/api/v1/users${query({ limit: q.limit, cursor: q.cursor })}`, undefined, o);
  }

  /** Erases a user and everything of theirs (admin scope); answers what went. Erasing again is a 404. */
  eraseUser(name: string, o: CallOptions = {}): Promise<ErasureReport> {
    return this.call("DELETE", `/api/v1/users/${enc(name)}`, undefined, o);
  }

  /** The export of every chat of a user (admin scope), streamed line by line. */
  exportUser(name: string, o: CallOptions = {}): AsyncGenerator<ExportLine> {
    return this.lines(`/api/v1/users/${enc(name)}/export`, o);
  }

  /** Reads a JSON Lines answer as it arrives; an answer cut short throws (it lacks its `end` line). */
  private async *lines(path: string, o: CallOptions): AsyncGenerator<ExportLine> {
    const headers = { ...(await this.auth()), Accept: "application/x-ndjson" };
    const resp = await this.fetchImpl(this.baseUrl + path, { headers, signal: o.signal ?? null });
    if (!resp.ok || !resp.body) throw await errorOf(resp);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let rest = "";
    let ended = false;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += value;
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        const line = JSON.parse(rest.slice(0, nl)) as ExportLine;
        rest = rest.slice(nl + 1);
        ended = line.type === "end";
        yield line;
      }
    }
    if (!ended) throw new Error("chatd: the export ended without its end line");
  }

  /** The credentials of a request: the current token, and X-Chatd-User when acting for a user. */
  private async auth(): Promise<Record<string, string>> {
    const token = typeof this.token === "function" ? await this.token() : this.token;
    const h: Record<string, string> = { Authorization: `Bearer ${token}` };
    if (this.actAs !== undefined) h["X-Chatd-User"] = this.actAs;
    return h;
  }

  private streamInit() {
    return { fetch: this.fetchImpl, headers: () => this.auth(), backoffMs: this.backoffMs };
  }

  private async call<T>(method: string, path: string, body: unknown, o: CallOptions, idempotencyKey?: string): Promise<T> {
    const retried = method === "GET" || idempotencyKey !== undefined;
    const headers: Record<string, string> = { ...(await this.auth()), Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (idempotencyKey !== undefined) headers["Idempotency-Key"] = idempotencyKey;
    let backoff = this.backoffMs;
    for (let attempt = 1; ; attempt++) {
      const last = !retried || attempt >= this.attempts;
      let resp: Response;
      try {
        resp = await this.fetchImpl(this.baseUrl + path, {
          method,
          headers,
          body: body === undefined ? null : JSON.stringify(body),
          signal: o.signal ?? null,
        });
      } catch (err) {
        if (last || o.signal?.aborted) throw err;
        await sleep(backoff, o.signal);
        backoff *= 2;
        continue; // no answer: a connection error
      }
      if (resp.status === 204) return undefined as T;
      if (resp.ok) return (await resp.json()) as T;
      if (resp.status === 503 && !last) {
        await resp.body?.cancel();
        const after = Number(resp.headers.get("Retry-After"));
        await sleep(after > 0 ? after * 1000 : backoff, o.signal);
        backoff *= 2;
        continue;
      }
      throw await errorOf(resp);
    }
  }
}

const enc = encodeURIComponent;

/** A fresh Idempotency-Key: a random UUID. */
function newKey(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (ch) => {
    const r = (Math.random() * 16) | 0;
    return (ch === "x" ? r : (r & 3) | 8).toString(16);
  });
}

function query(q: Record<string, string | number | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
}

/**
 * A token function over your identity provider's token getter (Auth0's
 * getAccessTokenSilently, Supabase's session, ...): the JWT it gave is
 * reused until refreshBeforeSeconds (default 60) before its exp, then
 * fetched again; concurrent calls share one fetch.
 */
export function jwtSource(fetchToken: () => Promise<string>, o: { refreshBeforeSeconds?: number } = {}): () => Promise<string> {
  const margin = (o.refreshBeforeSeconds ?? 60) * 1000;
  let current: { token: string; renewAt: number } | undefined;
  let pending: Promise<string> | undefined;
  return async () => {
    if (current && Date.now() < current.renewAt) return current.token;
    pending ??= fetchToken()
      .then((token) => {
        current = { token, renewAt: jwtExpiry(token) - margin };
        return token;
      })
      .finally(() => {
        pending = undefined;
      });
    return pending;
  };
}

/** The exp of a JWT in ms (0 when it has none: always fetched again). */
function jwtExpiry(token: string): number {
  try {
    const part = token.split(".")[1] ?? "";
    const json = atob(part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "="));
    const exp = (JSON.parse(json) as { exp?: unknown }).exp;
    return typeof exp === "number" ? exp * 1000 : 0;
  } catch {
    return 0;
  }
}
