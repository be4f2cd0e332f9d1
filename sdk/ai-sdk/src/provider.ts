import { ChatdClient, type TokenSource } from "@chatd/client";
import { ChatdLanguageModel } from "./model.js";

export interface ChatdProviderSettings {
  /** The chatd server, e.g. http://127.0.0.1:8080. */
  baseURL: string;
  /**
   * An API token (`chatd token create --user NAME`), or a function that
   * returns the current JWT of the app's identity provider (see
   * jwtSource in @chatd/client): asked before every request to chatd.
   */
  token: TokenSource;
  /** Act for this user (X-Chatd-User): the token needs the act-as capability. */
  actAs?: string;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
  /** Headers sent with every request to chatd (the call's own headers are not forwarded). */
  headers?: Record<string, string>;
  /** Attempts of a retried request (creates and sends with one Idempotency-Key, reads; default 4). */
  attempts?: number;
  /** The first retry backoff in ms (default 250). */
  backoffMs?: number;
}

export interface ChatdProvider {
  /** A chatd model: a model id of the server, or none for its default model. */
  (modelId?: string): ChatdLanguageModel;
  languageModel(modelId?: string): ChatdLanguageModel;
}

/** The chatd provider: `createChatd({ baseURL, token })("local/mock")` is a LanguageModelV4. */
export function createChatd(s: ChatdProviderSettings): ChatdProvider {
  const client = () => new ChatdClient(clientOptions(s));
  const model = (modelId = "") => new ChatdLanguageModel(modelId, client);
  return Object.assign(model, { languageModel: model });
}

/** The @chatd/client options for provider (or transport) settings. */
export function clientOptions(s: ChatdProviderSettings) {
  const base = s.fetch ?? globalThis.fetch.bind(globalThis);
  const extra = s.headers;
  const f: typeof fetch = extra
    ? (input, init) => {
        const headers = new Headers(init?.headers);
        for (const [k, v] of Object.entries(extra)) headers.set(k, v);
        return base(input, { ...init, headers });
      }
    : base;
  return {
    baseUrl: s.baseURL,
    token: s.token,
    ...(s.actAs !== undefined ? { actAs: s.actAs } : {}),
    fetch: f,
    ...(s.attempts !== undefined ? { attempts: s.attempts } : {}),
    ...(s.backoffMs !== undefined ? { backoffMs: s.backoffMs } : {}),
  };
}
