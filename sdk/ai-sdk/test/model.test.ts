// The adapter as the model of the real AI SDK (`ai` 7): generateText and
// streamText against a live chatd whose mock model answers by markers
// (internal/jstest/aisdk_test.go says which).
import assert from "node:assert/strict";
import { test } from "node:test";
import { APICallError, InvalidPromptError, UnsupportedFunctionalityError } from "@ai-sdk/provider";
import type { JSONObject } from "@ai-sdk/provider";
import { generateText, Output, stepCountIs, streamText, tool, type ModelMessage, type ToolSet } from "ai";
import { z } from "zod";
import { ChatdTurnError, createChatd } from "../src/index.js";
import { baseURL, chatsWith, client, marker, streamCountingFetch, token, watchingFetch } from "./kit.js";

const chatd = createChatd({ baseURL, token });
const Report = z.object({ command: z.string(), steps: z.array(z.object({ name: z.string() })) });

interface Meta {
  chatId: string;
  requestId?: string;
  receiptMessageId?: number;
  attempts?: number;
  rejectedAttempts?: { attempt: number; reason: string }[];
  usage?: Record<string, number | null>;
}
const meta = (m: unknown): Meta => (m as { chatd: Meta }).chatd;

// A chat to continue: the stream of a call that continues a chat is open
// before its message is sent, so it sees the step from its first fragment
// (a new chat's first step may start before the stream connects).
/** Whether chatd's stream announced a gap in a step's preview (fragments it lost). */
function lostFragments(raw: unknown[]): boolean {
  const seen = new Set<string>();
  for (const ev of raw as { type: string; data: { history_version: number; generation_attempt: number } }[]) {
    const key = `${ev.data?.history_version}:${ev.data?.generation_attempt}`;
    if (ev.type === "message_part") seen.add(key);
    if (ev.type === "preview_reset" && seen.has(key)) return true;
  }
  return false;
}

// Its metadata, passed back as providerOptions.chatd, carries the chat
// (and the digests of its tools and system prompt).
async function newChat(what: string, tools: ToolSet = {}): Promise<{ chatd: JSONObject }> {
  const r = await generateText({ model: chatd(), prompt: marker(what), tools });
  return r.providerMetadata as { chatd: JSONObject };
}

test("Output.object, no tools: the typed value is the receipt's", async () => {
  const m = marker("Report the test command.");
  const r = await generateText({ model: chatd(), prompt: m, output: Output.object({ schema: Report }), include: { requestBody: true } });
  const md = meta(r.providerMetadata);
  assert.ok(md.requestId);
  const receipt = await client.getStructuredOutput(md.requestId);
  assert.equal(receipt.status, "succeeded");
  const command: string = r.output.command; // typed by zod
  assert.equal(typeof command, "string");
  assert.deepEqual(r.output, receipt.value);
  assert.equal(r.text, JSON.stringify(receipt.value));
  assert.equal(r.finishReason, "stop");
  assert.equal(md.receiptMessageId, receipt.receipt_message_id);
  assert.equal(md.attempts, 1);
  assert.deepEqual(md.rejectedAttempts, []);
  assert.deepEqual(md.usage, receipt.usage);
  assert.equal(r.response.id, md.requestId);
  // Output.object names no schema: the default name, chatd's pattern.
  const body = r.request.body as { response_format: { json_schema: { name: string } } };
  assert.equal(body.response_format.json_schema.name, "output");
  assert.ok((r.usage.inputTokens ?? 0) > 0 && (r.usage.outputTokens ?? 0) > 0, JSON.stringify(r.usage));
  const chats = await chatsWith(m);
  assert.equal(chats.length, 1);
  assert.equal(chats[0]?.requests, 1);
  assert.equal(chats[0]?.id, md.chatId);
});

test("a value repaired once succeeds, its attempts reported", async () => {
  const m = marker("[invalid-once] Report the test command.");
  const r = await generateText({ model: chatd(), prompt: m, output: Output.object({ schema: Report }) });
  const md = meta(r.providerMetadata);
  const receipt = await client.getStructuredOutput(md.requestId ?? "");
  assert.deepEqual(r.output, receipt.value);
  assert.equal(md.attempts, 2); // finalization attempts: one rejected, one accepted
  assert.deepEqual(md.rejectedAttempts, receipt.attempts); // chatd's list, verbatim
  assert.deepEqual(md.rejectedAttempts?.map((a) => [a.attempt, a.reason]), [[1, "invalid_value"]]);
});

test("exhausted: a typed, non-retryable error with validation_exhausted, and exactly one chat", async () => {
  const m = marker("[invalid-always] Report the test command.");
  let err: unknown;
  try {
    await generateText({ model: chatd(), prompt: m, output: Output.object({ schema: Report }) });
  } catch (e) {
    err = e;
  }
  assert.ok(ChatdTurnError.isInstance(err), String(err));
  assert.ok(err instanceof ChatdTurnError);
  assert.equal(err.code, "validation_exhausted");
  assert.equal(err.status, "failed");
  assert.equal(err.attempts, 3);
  assert.deepEqual(err.rejectedAttempts.map((a) => a.reason), ["invalid_value", "invalid_value", "invalid_value"]);
  assert.equal(APICallError.isInstance(err), false);
  assert.ok(err.requestId && err.receiptMessageId);
  const chats = await chatsWith(m);
  assert.equal(chats.length, 1, "the AI SDK must not run the turn again in another chat");
  assert.equal(chats[0]?.id, err.chatId);
  assert.equal(chats[0]?.requests, 1);
  const receipt = await client.getStructuredOutput(err.requestId);
  assert.equal(receipt.status, "failed");
});

test("an AI SDK tool runs client-side once, its result reaches the same chat, then the value", async () => {
  const m = marker("[weather] What is the weather in Florence?");
  let calls = 0;
  const r = await generateText({
    model: chatd(),
    prompt: m,
    tools: {
      get_weather: tool({
        description: "Weather for a city",
        inputSchema: z.object({ city: z.string() }),
        execute: async ({ city }) => {
          calls++;
          return `sunny-24 in ${city}`;
        },
      }),
    },
    stopWhen: stepCountIs(5),
    output: Output.object({ schema: z.object({ forecast: z.string() }) }),
  });
  assert.equal(calls, 1);
  assert.match(r.output.forecast, /sunny-24 in Florence/);
  assert.deepEqual(r.steps.map((s) => s.finishReason), ["tool-calls", "stop"]);
  const md = meta(r.providerMetadata);
  for (const s of r.steps) {
    assert.equal(meta(s.providerMetadata).chatId, md.chatId);
    assert.equal(meta(s.providerMetadata).requestId, md.requestId);
    for (const part of s.content) {
      if (part.type === "tool-result") continue; // the client's own result
      assert.equal(meta((part as { providerMetadata?: unknown }).providerMetadata).chatId, md.chatId, `part ${part.type}`);
    }
  }
  const call = r.steps[0]?.toolCalls[0];
  assert.equal(call?.toolName, "get_weather");
  assert.deepEqual(call?.input, { city: "Florence" });
  const chats = await chatsWith(m);
  assert.equal(chats.length, 1);
  assert.equal(chats[0]?.requests, 1);
  const history = await client.listMessages(md.chatId);
  const results = history.messages.flatMap((msg) => msg.content).filter((p) => p.type === "tool-result" && p.tool_name === "get_weather");
  assert.equal(results.length, 1);
  assert.match(JSON.stringify(results[0]), /sunny-24 in Florence/);
});

test("a continued conversation is one chat whose user messages are exactly the prompts", async () => {
  const first = marker("First question.");
  const a = await generateText({ model: chatd(), prompt: first });
  assert.equal(a.text, `mockllm: ${first}`);
  const chatId = meta(a.providerMetadata).chatId;
  const b = await generateText({ model: chatd(), prompt: "Second question.", providerOptions: { chatd: { chatId } } });
  assert.equal(b.text, "mockllm: Second question.");
  assert.equal(meta(b.providerMetadata).chatId, chatId);
  assert.deepEqual(b.warnings ?? [], []);
  // The messages of earlier steps carry the chat along too.
  const messages: ModelMessage[] = [{ role: "user", content: first }, ...a.response.messages, { role: "user", content: "Second question." }, ...b.response.messages, { role: "user", content: "Third." }];
  const c = await generateText({ model: chatd(), messages });
  assert.equal(meta(c.providerMetadata).chatId, chatId);
  const chats = await chatsWith(first);
  assert.equal(chats.length, 1);
  assert.deepEqual(chats[0]?.users, [first, "Second question.", "Third."]);
});

test("streamText: prose and a repair, and the output still parses and equals the receipt", async () => {
  const Titled = z.object({ title: z.string(), count: z.number().int() });
  const s = streamText({
    model: chatd(),
    prompt: "[prose-repair] Title the report.",
    output: Output.object({ schema: Titled }),
    includeRawChunks: true,
    providerOptions: await newChat("Set up."), // followed from the step's first fragment
  });
  let text = "";
  let reasoning = "";
  const partials: unknown[] = [];
  for await (const part of s.fullStream) {
    if (part.type === "text-delta") text += part.text;
    if (part.type === "reasoning-delta") reasoning += part.text;
    if (part.type === "raw" && (part.rawValue as { type: string }).type === "structured_output_partial") partials.push(part.rawValue);
  }
  const output = await s.output;
  const md = meta(await s.providerMetadata);
  const receipt = await client.getStructuredOutput(md.requestId ?? "");
  assert.deepEqual(output, receipt.value);
  assert.deepEqual(output, { title: "repaired", count: 2 });
  assert.equal(text, JSON.stringify(receipt.value)); // the text is the receipt's value only
  assert.match(reasoning, /Let me think about the title first\./); // the prose, as reasoning
  assert.match(reasoning, /Fixed it\./);
  assert.equal(md.attempts, 2);
  assert.ok(partials.length > 0, "partial objects come as raw chunks");
});

test("streamText: reasoning deltas, text deltas, usage and finish", async () => {
  const m = "[reasoning] Explain.";
  const s = streamText({ model: chatd(), prompt: m, providerOptions: await newChat("Set up."), includeRawChunks: true });
  const types = new Set<string>();
  let reasoning = "";
  let deltas = 0;
  const raw: unknown[] = [];
  for await (const part of s.fullStream) {
    types.add(part.type);
    if (part.type === "reasoning-delta") reasoning += part.text;
    if (part.type === "text-delta") deltas++;
    if (part.type === "raw") raw.push(part.rawValue);
  }
  assert.equal(reasoning, "Thinking it over, step by step.");
  assert.equal(await s.text, `mockllm: ${m}`);
  // Text streams in pieces, unless chatd lost preview fragments (a busy
  // server may): then the commit supplies the rest in one.
  assert.ok(deltas > 1 || lostFragments(raw), `text came in ${deltas} deltas`);
  assert.equal(await s.finishReason, "stop");
  const usage = await s.usage;
  assert.ok((usage.outputTokens ?? 0) > 0);
  for (const t of ["reasoning-start", "reasoning-end", "text-start", "text-end", "finish-step", "finish"]) assert.ok(types.has(t), t);
});

test("streamText with a client tool: tool-input deltas, then the tool's result in the same chat", async () => {
  let calls = 0;
  const tools = { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => (calls++, "rainy-12") }) };
  const providerOptions = await newChat("Set up.", tools);
  const chatId = meta(providerOptions).chatId;
  const s = streamText({ model: chatd(), prompt: "[weather] Weather?", tools, stopWhen: stepCountIs(3), providerOptions, includeRawChunks: true });
  let input = "";
  const raw: unknown[] = [];
  for await (const part of s.fullStream) {
    if (part.type === "tool-input-delta") input += part.delta;
    if (part.type === "raw") raw.push(part.rawValue);
  }
  // The input as the model wrote it, in deltas; a prefix of it if chatd
  // lost preview fragments (the tool call itself has it whole).
  if (lostFragments(raw)) assert.ok('{"city":"Florence"}'.startsWith(input), input);
  else assert.equal(input, '{"city":"Florence"}');
  assert.deepEqual((await s.warnings) ?? [], [], "the chat's tools, passed back, match");
  assert.equal(calls, 1);
  assert.match(await s.text, /^forecast: .*rainy-12/);
  const history = await client.listMessages(chatId);
  assert.equal(history.messages.filter((x) => x.role === "tool").length, 1);
});

test("chatd's own tools are provider-executed tool calls and results", async () => {
  const m = marker("[server-tool] Read the notes.");
  const r = await generateText({ model: chatd(), prompt: m });
  const call = r.content.find((p) => p.type === "tool-call");
  const result = r.content.find((p) => p.type === "tool-result");
  assert.equal(call?.toolName, "read_file");
  assert.equal(call?.providerExecuted, true);
  assert.equal(call?.dynamic, true);
  assert.equal(result?.type === "tool-result" && result.providerExecuted, true);
  assert.match(JSON.stringify(result?.type === "tool-result" ? result.output : null), /ship it/);
  assert.equal(r.text, `mockllm: ${m}`);
  assert.equal(r.steps.length, 1);
});

test("abort rejects within a second with the signal's reason, and the receipt ends cancelled", async () => {
  for (const when of ["after the create", "while the create is in flight"]) {
    const m = marker(`[hold] Report (${when}).`);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const w = watchingFetch(when === "after the create" ? {} : { before: () => held });
    const model = createChatd({ baseURL, token, fetch: w.fetch })();
    const ac = new AbortController();
    const run = generateText({ model, prompt: m, output: Output.object({ schema: Report }), abortSignal: ac.signal });
    run.catch(() => {});
    if (when === "after the create") await w.created;
    const reason = new Error(`stopped ${when}`);
    const t0 = performance.now();
    ac.abort(reason);
    await assert.rejects(run, (e) => e === reason);
    const took = performance.now() - t0;
    assert.ok(took < 1000, `rejected after ${took} ms`);
    release();
    const created = (await w.created) as { messages: { structured_output_request_id: string }[] };
    const res = await client.waitStructuredOutput(created.messages[0]?.structured_output_request_id ?? "");
    assert.equal(res.status, "cancelled", when);
    assert.equal(res.status === "cancelled" && res.error.code, "interrupted");
  }
});

test("a dropped connection is retried with one Idempotency-Key: one chatd request", async () => {
  const m = marker("Report after a dropped connection.");
  const w = watchingFetch({
    after: (n) => {
      if (n === 1) throw new TypeError("fetch failed: the connection dropped after chatd answered (test)");
    },
  });
  const model = createChatd({ baseURL, token, fetch: w.fetch, backoffMs: 10 })();
  const r = await generateText({ model, prompt: m, output: Output.object({ schema: Report }) });
  assert.equal(w.creates(), 2, "the create was sent twice");
  const chats = await chatsWith(m);
  assert.equal(chats.length, 1, "one chat in the database");
  assert.equal(chats[0]?.requests, 1, "one structured request");
  assert.deepEqual(chats[0]?.users, [m]);
  assert.equal(meta(r.providerMetadata).chatId, chats[0]?.id);
});

test("tool results submitted twice (a retried step) are found in the history, not refused", async () => {
  const m = marker("[weather] Weather, twice?");
  const inner = chatd();
  let results = 0;
  // Runs every tool-results step twice, as a retry after a lost answer would.
  const twice = {
    ...inner,
    specificationVersion: inner.specificationVersion,
    provider: inner.provider,
    modelId: inner.modelId,
    supportedUrls: inner.supportedUrls,
    doStream: inner.doStream.bind(inner),
    doGenerate: async (o: Parameters<typeof inner.doGenerate>[0]) => {
      if (o.prompt[o.prompt.length - 1]?.role === "tool") {
        results++;
        await inner.doGenerate(o);
      }
      return inner.doGenerate(o);
    },
  };
  const r = await generateText({
    model: twice,
    prompt: m,
    tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => "foggy-9" }) },
    stopWhen: stepCountIs(3),
  });
  assert.equal(results, 1);
  assert.match(r.text, /foggy-9/);
  const history = await client.listMessages(meta(r.providerMetadata).chatId);
  assert.equal(history.messages.filter((x) => x.role === "tool").length, 1);
});

test("settings chatd cannot honour are warnings; prompts it cannot represent are refused", async () => {
  const m = marker("Warm up.");
  const r = await generateText({ model: chatd(), prompt: m, temperature: 0.3, maxOutputTokens: 100, toolChoice: "none", tools: {} });
  const features = (r.warnings ?? []).map((w) => (w.type === "unsupported" ? w.feature : w.type));
  for (const f of ["temperature", "maxOutputTokens", "toolChoice"]) assert.ok(features.includes(f), JSON.stringify(r.warnings));

  const n = marker("A history chatd never saw.");
  await assert.rejects(
    generateText({ model: chatd(), messages: [{ role: "user", content: "Hi." }, { role: "assistant", content: "Hello." }, { role: "user", content: n }] }),
    (e) => InvalidPromptError.isInstance(e) && /earlier assistant/.test(e.message),
  );
  await assert.rejects(
    generateText({ model: chatd(), messages: [{ role: "user", content: [{ type: "text", text: n }, { type: "file", data: new Uint8Array([1]), mediaType: "image/png" }] }] }),
    (e) => UnsupportedFunctionalityError.isInstance(e),
  );
  assert.deepEqual(await chatsWith(n), [], "a refused prompt makes no chat");
});

test("Output.json() without a schema asks for any JSON value; a named schema is sanitised", async () => {
  const r = await generateText({ model: chatd(), prompt: marker("Any JSON."), output: Output.json(), include: { requestBody: true } });
  const body = r.request.body as { response_format: { json_schema: { name: string; schema: unknown } } };
  assert.deepEqual(body.response_format.json_schema.schema, {});
  const receipt = await client.getStructuredOutput(meta(r.providerMetadata).requestId ?? "");
  assert.deepEqual(r.output, receipt.value);
  const named = await generateText({ model: chatd(), prompt: marker("Named."), output: Output.object({ schema: Report, name: "project report (v2)" }), include: { requestBody: true } });
  const nb = named.request.body as { response_format: { json_schema: { name: string } } };
  assert.equal(nb.response_format.json_schema.name, "project_report__v2_");
});

test("an ordinary turn that fails is a ChatdTurnError with chatd's code", async () => {
  const m = marker("[provider-fail] Hello?");
  await assert.rejects(generateText({ model: chatd(), prompt: m }), (e) => ChatdTurnError.isInstance(e) && e.code === "provider_error" && e.status === "failed");
  assert.equal((await chatsWith(m)).length, 1);
});

test("a message sent to a busy chat waits in chatd's queue, and the call answers it", async () => {
  const hold = marker("[hold] Keep busy.");
  const created = await client.createChat({ content: [{ type: "text", text: hold }] });
  const chatId = created.chat.id;
  let queued!: () => void;
  const sent = new Promise<void>((r) => (queued = r));
  const watching: typeof fetch = async (input, init) => {
    const resp = await fetch(input, init);
    if (init?.method === "POST" && String(input instanceof Request ? input.url : input).endsWith("/messages")) queued();
    return resp;
  };
  const model = createChatd({ baseURL, token, fetch: watching })();
  const text = generateText({ model, prompt: "Next question.", providerOptions: { chatd: { chatId } } });
  const value = (async () => {
    await sent;
    return generateText({ model, prompt: "And a report.", providerOptions: { chatd: { chatId } }, output: Output.object({ schema: Report }) });
  })();
  await sent;
  const busy = await client.listMessages(chatId);
  assert.ok(busy.queued_messages.length >= 1, "the message is queued behind the held turn");
  await client.interrupt(chatId); // the held turn ends; the queue moves on
  assert.equal((await text).text, "mockllm: Next question.");
  const v = await value;
  const receipt = await client.getStructuredOutput(meta(v.providerMetadata).requestId ?? "");
  assert.deepEqual(v.output, receipt.value);
  assert.deepEqual((await chatsWith(hold))[0]?.users, [hold, "Next question.", "And a report."]);
});

test("tools that differ from a continued chat's are a warning", async () => {
  const first = await generateText({ model: chatd(), prompt: marker("Tools, first."), tools: { a: tool({ inputSchema: z.object({}) }) } });
  const again = await generateText({
    model: chatd(),
    prompt: "Tools, again.",
    tools: { b: tool({ inputSchema: z.object({}) }) },
    providerOptions: first.providerMetadata as { chatd: JSONObject },
  });
  assert.ok((again.warnings ?? []).some((w) => w.type === "other" && /tools .* differ/.test(w.message)), JSON.stringify(again.warnings));
});

test("a call's chat stream is closed when the call ends", async () => {
  const counting = streamCountingFetch();
  const model = createChatd({ baseURL, token, fetch: counting.fetch })();
  const first = await generateText({ model, prompt: marker("Streams, first.") });
  const providerOptions = first.providerMetadata as { chatd: JSONObject };
  for (let i = 0; i < 3; i++) {
    await generateText({ model, prompt: `Streams, again ${i}.`, providerOptions }); // streams opened before the send
    const s = streamText({ model, prompt: `Streams, streamed ${i}.`, providerOptions });
    await s.text;
  }
  const timeout = new Promise<void>((r) => setTimeout(r, 5000).unref());
  await Promise.race([counting.closed(), timeout]);
  assert.equal(counting.open(), 0, "streams left open");
});

test("an abort while the AI SDK runs a client tool interrupts the paused turn", async () => {
  const m = marker("[weather] Weather, then stop.");
  const ac = new AbortController();
  const reason = new Error("stopped during the tool");
  const run = generateText({
    model: chatd(),
    prompt: m,
    output: Output.object({ schema: z.object({ forecast: z.string() }) }),
    tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => (ac.abort(reason), "never sent") }) },
    stopWhen: stepCountIs(5),
    abortSignal: ac.signal,
  });
  await assert.rejects(run, (e) => e === reason);
  const chats = await chatsWith(m);
  assert.equal(chats.length, 1);
  const history = await client.listMessages(chats[0]?.id ?? "");
  const res = await client.waitStructuredOutput(history.messages[0]?.structured_output_request_id ?? "", { signal: AbortSignal.timeout(30_000) });
  assert.equal(res.status, "cancelled");
  assert.equal(res.status === "cancelled" && res.error.code, "interrupted");
});
