// The page of the browser test (internal/jstest TestAISDKBrowser), bundled
// with esbuild: on another origin than chatd, a chat with the transport
// (EventSource and stream tickets) asks for a structured value that needs
// a client tool, answers the tool, and reports what it got to its server.
import { lastAssistantMessageIsCompleteWithToolCalls, type UIMessage } from "ai";
import { z } from "zod";
import { createChatdTransport, type ChatdMessageMetadata } from "../../src/index.js";
import { Chat, finished } from "../chat.js";

const cfg = (globalThis as unknown as { CHATD: { url: string; token: string } }).CHATD;
const report = (x: unknown) => fetch("/report", { method: "POST", body: JSON.stringify(x) });

type Msg = UIMessage<ChatdMessageMetadata>;

async function main() {
  let tickets = 0;
  const counting: typeof fetch = (input, init) => {
    if ((input instanceof Request ? input.url : String(input)).endsWith("/stream-ticket")) tickets++;
    return fetch(input, init);
  };
  const transport = createChatdTransport<Msg>({
    baseURL: cfg.url,
    token: cfg.token,
    fetch: counting,
    output: { schema: z.object({ forecast: z.string() }), name: "forecast" },
    tools: { get_weather: { description: "Weather for a city", inputSchema: z.object({ city: z.string() }) } },
  });
  const f = finished<Msg>();
  const chat: Chat<Msg> = new Chat<Msg>({
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      const { city } = toolCall.input as { city: string };
      void chat.addToolOutput({ tool: "get_weather", toolCallId: toolCall.toolCallId, output: `sunny-30 in ${city}` });
    },
    onFinish: f.onFinish,
    onError: (e) => void report({ error: String(e) }),
  });
  await chat.sendMessage({ text: "[weather] What is the weather, browser?" });
  await f.done;
  const msg = chat.messages[chat.messages.length - 1];
  const part = (type: string) => msg?.parts.find((p) => p.type === type) as Record<string, unknown> | undefined;
  await report({
    status: chat.status,
    receipt: part("data-chatd-receipt")?.["data"],
    tool: part("tool-get_weather")?.["state"],
    text: msg?.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join(""),
    messages: chat.messages.length,
    tickets,
  });
}

main().catch((e: unknown) => report({ error: String(e) }));
