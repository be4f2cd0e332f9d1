// Typical code against a client generated from the served OpenAPI document
// by independent tools (openapi-typescript + openapi-fetch). It must
// type-check under `tsc --strict` without casts: CI compiles it against a
// fresh generation (internal/jstest).
import createClient from "openapi-fetch";
import type { components, paths } from "./generated.js";

type Schemas = components["schemas"];

export async function typical(baseUrl: string, token: string): Promise<string[]> {
  const api = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  const seen: string[] = [];

  // A real nested schema as response_format, and a dynamic tool's input_schema.
  const created = await api.POST("/api/v1/chats", {
    params: { header: { "Idempotency-Key": "key-1" } },
    body: {
      content: [{ type: "text", text: "Report the test command." }],
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "report",
          schema: {
            type: "object",
            properties: {
              command: { type: "string" },
              steps: { type: "array", items: { type: "object", properties: { name: { type: "string" } } } },
            },
            required: ["command"],
            additionalProperties: false,
          },
        },
      },
      dynamic_tools: [
        {
          name: "get_weather",
          description: "Weather for a city",
          input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      ],
    },
  });
  if (created.error) {
    return [created.error.message, ...(created.error.validations ?? []).map((v) => v.field)];
  }
  const chat: Schemas["Chat"] = created.data.chat;
  const requestId: string | undefined = created.data.messages[0]?.structured_output_request_id;

  // A send without busy_behavior (or response_format), narrowed on queued.
  const sent = await api.POST("/api/v1/chats/{chat}/messages", {
    params: { path: { chat: chat.id } },
    body: { content: [{ type: "text", text: "And then?" }] },
  });
  if (sent.data) {
    if (sent.data.queued) {
      seen.push(`queued ${sent.data.queued_message.id}`);
    } else {
      seen.push(`message ${sent.data.message.id}`);
    }
  }

  // Narrowing a message part by type.
  const history = await api.GET("/api/v1/chats/{chat}/messages", {
    params: { path: { chat: chat.id }, query: { limit: 100 } },
  });
  for (const m of history.data?.messages ?? []) {
    for (const part of m.content) {
      switch (part.type) {
        case "text":
          seen.push(part.text.toUpperCase());
          break;
        case "tool-call":
          seen.push(`${part.tool_name ?? "?"}(${JSON.stringify(part.args)})`);
          break;
        case "tool-result":
          seen.push(`${part.tool_call_id ?? "?"} -> ${part.is_error ? "error" : "ok"}`);
          break;
        case "file":
          seen.push(part.media_type ?? "");
          break;
        default:
          seen.push(part.type);
      }
    }
    const outcome = m.structured_output;
    if (outcome?.status === "failed") {
      seen.push(outcome.error?.code ?? "");
    }
  }

  // The lookup with a long poll; the receipt's status is an enum.
  if (requestId) {
    const res = await api.GET("/api/v1/structured-outputs/{request_id}", {
      params: { path: { request_id: requestId }, query: { wait: "30s" } },
    });
    const status: "pending" | "succeeded" | "failed" | "cancelled" | undefined = res.data?.status;
    seen.push(status ?? "none");
  }
  return seen;
}
