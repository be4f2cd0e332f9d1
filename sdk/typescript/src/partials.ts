import type { components } from "./schema.js";
import type { StreamEvent } from "./sse.js";

/** Anything with a parse method, such as a zod schema. */
export interface Parser<T> {
  parse(value: unknown): T;
}

type S = components["schemas"];

/**
 * What a partial value of T can be while the model writes it: any member
 * may still be missing, strings and arrays may be cut short.
 */
export type PartialValue<T> = T extends readonly (infer U)[]
  ? PartialValue<U>[]
  : T extends object
    ? { [K in keyof T]?: PartialValue<T[K]> }
    : T;

/**
 * An element of `partials`: a `structured_output_partial` of the request
 * (a preview, never a result), or last, the request's receipt.
 */
export type PartialEvent<T> =
  | {
      type: "partial";
      /** The value so far, typed (not checked) by the schema: it may still be rejected. */
      value: PartialValue<T>;
      /** A `preview_reset` came since the previous partial: the model writes the value again (a repair, a new attempt). */
      restarted: boolean;
      data: S["StructuredOutputPartial"];
    }
  | {
      type: "receipt";
      /** The committed outcome: the one result. */
      output: S["StructuredOutput"];
      /** The succeeded value, parsed by the schema when one was given. */
      value?: T;
    };

/**
 * Reads a chat's stream (`client.stream(chat)`, or one the caller already
 * holds open) for the partial values of one structured request, and ends
 * with its receipt, closing the stream. Other events are skipped. Opened
 * any time before the receipt, it yields the whole series: a stream that
 * connects (or reconnects) while the model writes first gets the call so
 * far, so its partial values start from the first.
 */
export async function* partials<T = unknown>(
  events: AsyncIterable<StreamEvent>,
  requestId: string,
  o: { schema?: Parser<T> } = {},
): AsyncGenerator<PartialEvent<T>> {
  let restarted = false;
  for await (const ev of events) {
    if (ev.type === "preview_reset") {
      restarted = true;
    } else if (ev.type === "structured_output_partial" && ev.data.request_id === requestId) {
      yield { type: "partial", value: ev.data.value as PartialValue<T>, restarted, data: ev.data };
      restarted = false;
    } else if (ev.type === "message" && ev.data.structured_output?.request_id === requestId) {
      const output = ev.data.structured_output;
      if (output.status !== "succeeded") {
        yield { type: "receipt", output };
      } else {
        yield { type: "receipt", output, value: o.schema ? o.schema.parse(output.value) : (output.value as T) };
      }
      return;
    }
  }
}
