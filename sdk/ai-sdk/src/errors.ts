import { AISDKError, APICallError } from "@ai-sdk/provider";
import { ChatdError, type Attempt, type Usage } from "@chatd/client";

const name = "ChatdTurnError";
const marker = `chatd.ai-sdk.error.${name}`;
const symbol: unique symbol = Symbol.for(marker);

/**
 * A chatd turn that ended without a result: a `failed` or `cancelled`
 * receipt of a structured request (`code` such as `validation_exhausted`,
 * `interrupted`), or an ordinary turn that failed (`provider_error`, …).
 * Never retryable: the AI SDK must not run the turn again in a new chat,
 * and no rejected candidate is ever an output.
 */
export class ChatdTurnError extends AISDKError {
  private readonly [symbol] = true;
  /** The receipt's error code (or the failed turn's, when chatd gave one). */
  readonly code: string | undefined;
  readonly status: "failed" | "cancelled";
  readonly chatId: string;
  readonly requestId: string | undefined;
  readonly receiptMessageId: number | undefined;
  /** Finalization attempts the request made (all of them rejected, for a failed request). */
  readonly attempts: number;
  /** chatd's rejected attempts, verbatim (`error.attempts` of the receipt). */
  readonly rejectedAttempts: Attempt[];
  /** The request's token usage, summed by chatd over its steps. */
  readonly usage: Usage | undefined;
  readonly isRetryable = false;

  constructor(o: {
    message: string;
    code?: string | undefined;
    status: "failed" | "cancelled";
    chatId: string;
    requestId?: string | undefined;
    receiptMessageId?: number | undefined;
    rejectedAttempts?: Attempt[] | undefined;
    usage?: Usage | undefined;
  }) {
    super({ name, message: o.message });
    this.code = o.code;
    this.status = o.status;
    this.chatId = o.chatId;
    this.requestId = o.requestId;
    this.receiptMessageId = o.receiptMessageId;
    this.rejectedAttempts = o.rejectedAttempts ?? [];
    this.attempts = this.rejectedAttempts.length;
    this.usage = o.usage;
  }

  static isInstance(error: unknown): error is ChatdTurnError {
    return AISDKError.hasMarker(error, marker);
  }
}

/**
 * An HTTP error of chatd as the AI SDK's APICallError, never retryable:
 * the client already retried what is safe to retry (with one
 * Idempotency-Key), and the AI SDK's own retry would start the turn again.
 */
export function apiError(err: unknown, url: string, body: unknown): unknown {
  if (err instanceof ChatdError) {
    return new APICallError({
      message: err.message,
      url,
      requestBodyValues: body,
      statusCode: err.status,
      responseBody: JSON.stringify(err.body),
      isRetryable: false,
      data: err.body,
      cause: err,
    });
  }
  if (err instanceof TypeError) {
    // A connection error that outlasted the client's retries.
    return new APICallError({ message: `chatd: ${err.message}`, url, requestBodyValues: body, isRetryable: false, cause: err });
  }
  return err;
}
