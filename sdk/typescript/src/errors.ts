import type { components } from "./schema.js";

export type ErrorBody = components["schemas"]["Error"];

/** A non-2xx answer of the server, with its Error body. */
export class ChatdError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  constructor(status: number, body: ErrorBody) {
    const fields = (body.validations ?? []).map((v) => ` [${v.field}: ${v.detail}]`).join("");
    super(`chatd: HTTP ${status}: ${body.message}${fields}`);
    this.name = "ChatdError";
    this.status = status;
    this.body = body;
  }
}

/** Reads an error answer's body (the Error shape, or its text). */
export async function errorOf(resp: Response): Promise<ChatdError> {
  const text = await resp.text();
  try {
    return new ChatdError(resp.status, JSON.parse(text) as ErrorBody);
  } catch {
    return new ChatdError(resp.status, { message: text || resp.statusText });
  }
}

export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
