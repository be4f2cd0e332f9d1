// The useChat transport, driven by the AI SDK's own chat state machine
// (AbstractChat, what useChat wraps) against a live chatd.
import assert from "node:assert/strict";
import { test } from "node:test";
import { lastAssistantMessageIsCompleteWithToolCalls, type UIMessage } from "ai";
import { z } from "zod";
import { createChatdTransport, type ChatdMessageMetadata, type ChatdPartialData, type ChatdReceiptData, type ChatStore } from "../src/index.js";
import { Chat, finished as finishedOf } from "./chat.js";
import { baseURL, chatsWith, client, isPartialOf, marker, token } from "./kit.js";

type Msg = UIMessage<ChatdMessageMetadata>;
const Report = z.object({ command: z.string(), steps: z.array(z.object({ name: z.string() })) });
const Titled = z.object({ title: z.string(), count: z.number().int() });
const weather = { get_weather: { description: "Weather for a city", inputSchema: z.object({ city: z.string() }) } };

const finished = (): ReturnType<typeof finishedOf<Msg>> => finishedOf<Msg>();

const last = (chat: Chat<Msg>) => chat.messages[chat.messages.length - 1];
const textOf = (m: Msg | undefined) => (m?.parts ?? []).flatMap((p) => (p.type === "text" ? [p.text] : [])).join("");
const partsOf = <T extends string>(m: Msg | undefined, type: T) => (m?.parts ?? []).filter((p) => p.type === type) as (Msg["parts"][number] & { type: T })[];

test("a structured request: the receipt part, its value as text, partials for onData", async () => {
  const partials: ChatdPartialData[] = [];
  const chat = new Chat<Msg>({
    transport: createChatdTransport({ baseURL, token, output: { schema: Titled, name: "titled" } }),
    onData: (p) => void (p.type === "data-chatd-partial" && partials.push(p.data as ChatdPartialData)),
  });
  const m = marker("Set up.");
  await chat.sendMessage({ text: m });
  // A continued chat: its stream is open before the message is sent.
  await chat.sendMessage({ text: "[prose-repair] Title it." });
  assert.equal(chat.status, "ready", String(chat.error));
  const msg = last(chat);
  const receipt = partsOf(msg, "data-chatd-receipt")[0]?.data as ChatdReceiptData;
  assert.equal(receipt.status, "succeeded");
  const lookup = await client.getStructuredOutput(receipt.requestId);
  assert.deepEqual(receipt.value, lookup.value);
  assert.equal(receipt.attempts, 2);
  assert.deepEqual(receipt.rejectedAttempts, lookup.attempts);
  assert.equal(textOf(msg), JSON.stringify(lookup.value)); // the text is the receipt's value only
  const reasoning = partsOf(msg, "reasoning").map((p) => p.text).join("");
  assert.match(reasoning, /Fixed it\./);
  assert.equal(msg?.metadata?.chatd.chatId, receipt.chatId);
  assert.equal(msg?.metadata?.chatd.receiptMessageId, receipt.receiptMessageId);
  assert.equal(partsOf(msg, "data-chatd-partial").length, 0, "transient partials are not kept");
  // Previews of the value, never a result: each one a partial of a value
  // the model wrote (the repair's are partials of the receipt's).
  const mine = partials.filter((p) => p.requestId === receipt.requestId);
  assert.ok(mine.length > 0);
  assert.ok(isPartialOf(mine[mine.length - 1]?.value, lookup.value), JSON.stringify(mine[mine.length - 1]));
  assert.equal((await chatsWith(m)).length, 1);
});

test("partials as one data part, replaced in place; the token from a function, asked per request", async () => {
  let asked = 0;
  const current = () => (asked++, token); // as a JWT getter would be
  const chat = new Chat<Msg>({ transport: createChatdTransport({ baseURL, token: current, output: { schema: Titled }, partials: "part" }) });
  await chat.sendMessage({ text: marker("Set up.") });
  await chat.sendMessage({ text: "[prose-repair] Title it again." });
  const parts = partsOf(last(chat), "data-chatd-partial");
  assert.equal(parts.length, 1, "one part, replaced in place");
  // The repair's latest partial: a partial of its value (the last one sent
  // before the receipt is usually all of it).
  assert.ok(isPartialOf((parts[0]?.data as ChatdPartialData).value, { title: "repaired", count: 2 }), JSON.stringify(parts[0]));
  assert.ok(asked >= 3, `the token function was asked ${asked} times: once per request and stream`);
});

test("a failed receipt: the receipt part, and the chat's error", async () => {
  const chat = new Chat<Msg>({ transport: createChatdTransport({ baseURL, token, output: { schema: Report } }) });
  const m = marker("[invalid-always] Report.");
  await chat.sendMessage({ text: m });
  assert.equal(chat.status, "error");
  assert.match(String(chat.error?.message), /validation_exhausted/);
  const receipt = partsOf(last(chat), "data-chatd-receipt")[0]?.data as ChatdReceiptData;
  assert.equal(receipt.status, "failed");
  assert.equal(receipt.error?.code, "validation_exhausted");
  assert.equal(receipt.attempts, 3);
  assert.equal((await chatsWith(m)).length, 1);
});

test("a client tool: onToolCall, addToolOutput, and the turn goes on in the same chat and message", async () => {
  const f = finished();
  let calls = 0;
  const chat: Chat<Msg> = new Chat<Msg>({
    transport: createChatdTransport({ baseURL, token, tools: weather }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      calls++;
      void chat.addToolOutput({ tool: "get_weather", toolCallId: toolCall.toolCallId, output: `cloudy-17 in ${(toolCall.input as { city: string }).city}` });
    },
    onFinish: f.onFinish,
  });
  const m = marker("[weather] Weather?");
  await chat.sendMessage({ text: m });
  await f.done;
  assert.equal(calls, 1);
  assert.equal(chat.messages.length, 2);
  const msg = last(chat);
  const tool = partsOf(msg, "tool-get_weather")[0] as { state: string; input: unknown; output: unknown } | undefined;
  assert.equal(tool?.state, "output-available");
  assert.deepEqual(tool?.input, { city: "Florence" });
  assert.match(textOf(msg), /^forecast: .*cloudy-17 in Florence/);
  const chats = await chatsWith(m);
  assert.equal(chats.length, 1);
  const history = await client.listMessages(chats[0]?.id ?? "");
  assert.equal(history.messages.filter((x) => x.role === "tool").length, 1);
});

test("a dropped stream mid-turn reconnects without loss", async () => {
  let streams = 0;
  let cut = false;
  // Cuts the first stream that shows a preview fragment, once.
  const cutting: typeof fetch = async (input, init) => {
    const resp = await fetch(input, init);
    const url = input instanceof Request ? input.url : String(input);
    if (!url.includes("/stream") || !resp.body) return resp;
    streams++;
    if (cut) return resp;
    const text = new TextDecoder();
    let seen = "";
    const body = resp.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          seen += text.decode(chunk, { stream: true });
          if (!cut && seen.includes("event: message_part")) {
            cut = true;
            c.error(new TypeError("network error (test): the stream dropped"));
            return;
          }
          c.enqueue(chunk);
        },
      }),
    );
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  const chat = new Chat<Msg>({ transport: createChatdTransport({ baseURL, token, fetch: cutting, backoffMs: 10 }) });
  const m = marker("Start.");
  await chat.sendMessage({ text: m });
  // A continued chat: its stream is open before the message is sent, so the
  // cut lands mid-step.
  await chat.sendMessage({ text: "[slow] Tell me a long enough story to arrive in many pieces, please." });
  assert.equal(chat.status, "ready", String(chat.error));
  assert.ok(cut && streams >= 3, `cut ${cut}, ${streams} streams`);
  const chatId = last(chat)?.metadata?.chatd.chatId ?? "";
  const history = await client.listMessages(chatId);
  const committed = history.messages[history.messages.length - 1]?.content.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("");
  assert.equal(textOf(last(chat)), committed);
  assert.equal(textOf(last(chat)), "mockllm: [slow] Tell me a long enough story to arrive in many pieces, please.");
});

test("after a reload, resumeStream replays the running turn, and its tool call is answered", async () => {
  const store: ChatStore = (() => {
    const m = new Map<string, string>();
    return { get: (k: string) => m.get(k), set: (k: string, v: string) => void m.set(k, v) };
  })();
  const transport = createChatdTransport<Msg>({ baseURL, token, tools: weather, chats: store });
  const id = `ui-${Math.random()}`;
  const first = new Chat<Msg>({ id, transport }); // no onToolCall: the page is closed before it answers
  const m = marker("[weather] Weather, later?");
  await first.sendMessage({ text: m });
  assert.equal(partsOf(last(first), "tool-get_weather")[0]?.state, "input-available");

  const f = finished();
  const again: Chat<Msg> = new Chat<Msg>({ id, transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls, onFinish: f.onFinish });
  await again.resumeStream();
  assert.equal(again.messages.length, 1);
  const resumed = last(again);
  assert.equal(resumed?.id, last(first)?.id, "the replay keeps the message's id");
  const part = partsOf(resumed, "tool-get_weather")[0] as { toolCallId: string; state: string } | undefined;
  assert.equal(part?.state, "input-available");
  void again.addToolOutput({ tool: "get_weather", toolCallId: part?.toolCallId ?? "", output: "windy-5" });
  await f.done;
  assert.match(textOf(last(again)), /windy-5/);
  assert.equal((await chatsWith(m)).length, 1);
});

test("regenerate edits the last user message: the old answer is gone from the chat", async () => {
  const chat = new Chat<Msg>({ transport: createChatdTransport({ baseURL, token }) });
  const m = marker("Say something.");
  await chat.sendMessage({ text: m });
  const chatId = last(chat)?.metadata?.chatd.chatId ?? "";
  await chat.regenerate();
  assert.equal(chat.status, "ready", String(chat.error));
  assert.equal(chat.messages.length, 2);
  assert.equal(textOf(last(chat)), `mockllm: ${m}`);
  const history = await client.listMessages(chatId);
  assert.deepEqual(history.messages.map((x) => x.role), ["user", "assistant"]);
  assert.deepEqual((await chatsWith(m))[0]?.users, [m]);
});

test("stop() interrupts the turn: its receipt is cancelled", async () => {
  let created!: (id: string) => void;
  const chatIdKnown = new Promise<string>((r) => (created = r));
  const store: ChatStore = { get: () => undefined, set: (_k, v) => created(v) };
  const chat = new Chat<Msg>({ transport: createChatdTransport({ baseURL, token, output: { schema: Report }, chats: store }) });
  const sent = chat.sendMessage({ text: marker("[hold] Report.") });
  const chatId = await chatIdKnown;
  await chat.stop();
  await sent;
  const history = await client.listMessages(chatId);
  const requestId = history.messages[0]?.structured_output_request_id ?? "";
  const res = await client.waitStructuredOutput(requestId);
  assert.equal(res.status, "cancelled");
  assert.equal(res.status === "cancelled" && res.error.code, "interrupted");
});
