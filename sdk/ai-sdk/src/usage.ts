import type { JSONObject, LanguageModelV4Usage } from "@ai-sdk/provider";
import type { Usage } from "@chatd/client";

/**
 * chatd's usage in the AI SDK's terms: input = chatd's input (not cached)
 * + cache reads + cache writes; reasoning tokens are part of the output.
 * A figure chatd has as null (not reported) is undefined, not zero.
 */
export function usageV4(u: Usage | undefined): LanguageModelV4Usage {
  const v = (x: number | null | undefined) => (x == null ? undefined : x);
  const input = v(u?.input_tokens);
  const cacheRead = v(u?.cache_read_tokens);
  const cacheWrite = v(u?.cache_write_tokens);
  const output = v(u?.output_tokens);
  const reasoning = v(u?.reasoning_tokens);
  const known = input !== undefined || cacheRead !== undefined || cacheWrite !== undefined;
  return {
    inputTokens: {
      total: known ? (input ?? 0) + (cacheRead ?? 0) + (cacheWrite ?? 0) : undefined,
      noCache: input,
      cacheRead,
      cacheWrite,
    },
    outputTokens: {
      total: output,
      text: output !== undefined && reasoning !== undefined ? output - reasoning : undefined,
      reasoning,
    },
    ...(u ? { raw: { ...u } as JSONObject } : {}),
  };
}
