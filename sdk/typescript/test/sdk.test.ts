// Tests of the SDK against a real chatd (with a mock model) that the Go
// driver (internal/jstest) starts: CHATD_URL and CHATD_TOKEN name it.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { z } from "zod";
import { type Attempt, type AttemptError, ChatdClient, ChatdError, jwtSource, partials, type PartialEvent, type StreamEvent } from "../src/index.js";
import { responseFormat, schemaFromZod } from "../src/zod.js";

const baseUrl = process.env["CHATD_URL"] ?? "";
const token = process.env["CHATD_TOKEN"] ?? "";
assert.ok(baseUrl && token, "CHATD_URL and CHATD_TOKEN must be set (run through go test ./internal/jstest)");

const Report = z.object({ command: z.string(), steps: z.array(z.object({ name: z.string() })).optional() });

test("createChat + waitStructuredOutput with a zod parser", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({
    content: [{ type: "text", text: "Report the test command." }],
    response_format: responseFormat("report", Report),
  });
  const requestId = created.messages[0]?.structured_output_request_id;
  assert.ok(requestId);
  const res = await c.waitStructuredOutput(requestId, { schema: Report });
  assert.equal(res.status, "succeeded");
  if (res.status === "succeeded") {
    const command: string = res.value.command; // typed by zod
    assert.equal(typeof command, "string");
  }
  assert.equal(res.chat_id, created.chat.id);
});

test("rejected attempts: once on the lookup, failed or repaired, and a failure message for people", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const ask = async (text: string) => {
    const created = await c.createChat({ content: [{ type: "text", text }], response_format: responseFormat("report", Report) });
    const requestId = created.messages[0]?.structured_output_request_id;
    assert.ok(requestId);
    return c.waitStructuredOutput(requestId, { schema: Report });
  };
  const failed = await ask("invalid-always: report the test command.");
  assert.equal(failed.status, "failed");
  if (failed.status === "failed") {
    assert.equal(failed.error.code, "validation_exhausted");
    assert.equal(failed.error.attempts, undefined); // the receipt's list; the lookup has its own
    assert.match(failed.error.message, /^3 attempts were rejected; the last: .*\.$/);
    assert.doesNotMatch(failed.error.message, /coder_structured_output|Fix the value/);
    const attempts: Attempt[] = failed.attempts ?? [];
    assert.deepEqual(attempts.map((a) => [a.attempt, a.reason]), [[1, "invalid_value"], [2, "invalid_value"], [3, "invalid_value"]]);
    for (const a of attempts) {
      const e: AttemptError | undefined = a.errors[0];
      assert.ok(e && typeof e.instance_path === "string" && e.keyword !== "" && e.message !== "");
      assert.equal(a.truncated, a.errors_total > a.errors.length);
    }
  }
  const repaired = await ask("invalid-once: report the test command.");
  assert.equal(repaired.status, "succeeded");
  assert.deepEqual(repaired.attempts?.map((a) => a.reason), ["invalid_value"]);
});

test("schemaFromZod gives a schema the server admits, without $schema", () => {
  const s = schemaFromZod(Report);
  assert.equal(s["$schema"], undefined);
  assert.equal(s["type"], "object");
  assert.deepEqual(s["required"], ["command"]);
});

test("a 400 is a ChatdError naming the field", async () => {
  const c = new ChatdClient({ baseUrl, token });
  await assert.rejects(
    c.createChat({
      content: [{ type: "text", text: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "bad name!", schema: { type: "object" } } },
    }),
    (err: unknown) => err instanceof ChatdError && err.status === 400 && err.body.validations?.[0]?.field === "response_format.json_schema.name",
  );
});

// flaky starts a proxy to chatd that answers the first `fail` requests of
// each create/send itself (503 or a dropped connection), or forwards it and
// drops the server's answer ("lost": the work is done, the client does not
// know), and records the Idempotency-Key and Last-Event-ID headers it sees.
async function flaky(fail: (n: number) => "503" | "drop" | "lost" | undefined) {
  const seen: { method: string; url: string; key?: string | undefined; lastEventId?: string | undefined }[] = [];
  let n = 0;
  const target = new URL(baseUrl);
  const server = http.createServer((req, res) => {
    const i = n++;
    seen.push({ method: req.method ?? "", url: req.url ?? "", key: req.headers["idempotency-key"] as string | undefined,
      lastEventId: req.headers["last-event-id"] as string | undefined });
    const f = fail(i);
    if (f === "drop") {
      req.socket.destroy();
      return;
    }
    if (f === "503") {
      res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "0" });
      res.end('{"message":"The database is not reachable."}');
      return;
    }
    const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent: false }, (r) => {
      if (f === "lost") {
        r.resume();
        r.on("end", () => req.socket.destroy());
        return;
      }
      res.writeHead(r.statusCode ?? 502, r.headers);
      res.on("close", () => r.destroy()); // the client left: so does the upstream stream
      r.pipe(res);
    });
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

test("creates and sends retry 503s, dropped connections and lost answers with one Idempotency-Key", async () => {
  // Requests 0-3 create the chat, 4-7 send a message: each call gets a 503,
  // a dropped connection and a lost answer (done by the server, never seen)
  // before its answer comes through.
  const plan = ["503", "drop", "lost", undefined] as const;
  const p = await flaky((i) => plan[i % 4]);
  try {
    const c = new ChatdClient({ baseUrl: p.url, token, backoffMs: 10 });
    const direct = new ChatdClient({ baseUrl, token });
    const created = await c.createChat({ content: [{ type: "text", text: "Exactly once." }] });
    const sent = await c.send(created.chat.id, { content: [{ type: "text", text: "Sent exactly once." }] });
    assert.equal(p.seen.length, 8);
    const createKeys = new Set(p.seen.slice(0, 4).map((s) => s.key));
    const sendKeys = new Set(p.seen.slice(4).map((s) => s.key));
    assert.equal(createKeys.size, 1, "a create's retries reuse its key");
    assert.equal(sendKeys.size, 1, "a send's retries reuse its key");
    assert.ok([...createKeys][0] && [...sendKeys][0] && [...createKeys][0] !== [...sendKeys][0], "each call has its own key");
    // Each happened once: one chat with this id among the caller's chats,
    // one copy of the sent message (in history or the queue).
    const chats = await direct.listChats({ limit: 100 });
    assert.equal(chats.chats.filter((ch) => ch.id === created.chat.id).length, 1);
    const page = await direct.listMessages(created.chat.id);
    const texts = [...page.messages, ...page.queued_messages].flatMap((m) => m.content.flatMap((part) => (part.type === "text" ? [part.text] : [])));
    assert.equal(texts.filter((t) => t === "Exactly once.").length, 1);
    assert.equal(texts.filter((t) => t === "Sent exactly once.").length, 1);
    assert.ok(sent.queued ? sent.queued_message.id > 0 : sent.message.id > 0);
  } finally {
    await p.close();
  }
});

test("a call that is not a create or a send is not retried", async () => {
  const p = await flaky((i) => (i === 0 ? "503" : undefined));
  try {
    const c = new ChatdClient({ baseUrl: p.url, token, backoffMs: 10 });
    await assert.rejects(c.interrupt(randomUUID()), (err: unknown) => err instanceof ChatdError && err.status === 503);
    assert.equal(p.seen.length, 1);
  } finally {
    await p.close();
  }
});

test("a given Idempotency-Key replays the first answer", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const key = randomUUID();
  const a = await c.createChat({ content: [{ type: "text", text: "Once." }] }, { idempotencyKey: key });
  const b = await c.createChat({ content: [{ type: "text", text: "Once." }] }, { idempotencyKey: key });
  assert.equal(a.chat.id, b.chat.id);
});

test("send without busy_behavior narrows on queued", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({ content: [{ type: "text", text: "Hello." }] });
  const sent = await c.send(created.chat.id, { content: [{ type: "text", text: "Again." }] });
  const id: number = sent.queued ? sent.queued_message.id : sent.message.id;
  assert.ok(id > 0);
});

async function collect(events: AsyncGenerator<StreamEvent>, until: (e: StreamEvent) => boolean): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const e of events) {
    out.push(e);
    if (until(e)) break;
  }
  return out;
}

test("stream yields typed events up to the receipt, resuming with Last-Event-ID", async () => {
  // The first stream connection is cut after its first bytes are proxied:
  // the reader reconnects with Last-Event-ID and nothing is lost or repeated.
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({
    content: [{ type: "text", text: "Report." }],
    response_format: responseFormat("report", Report),
  });
  const requestId = created.messages[0]?.structured_output_request_id;
  await c.waitStructuredOutput(requestId ?? "");

  let streams = 0;
  const target = new URL(baseUrl);
  const seen: (string | undefined)[] = [];
  const proxy = http.createServer((req, res) => {
    const first = req.url?.includes("/stream") && streams++ === 0;
    seen.push(req.headers["last-event-id"] as string | undefined);
    const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent: false }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      res.on("close", () => r.destroy()); // the client left: so does the upstream stream
      r.once("data", (chunk: Buffer) => {
        if (first) {
          // Cut after the first event block (one read's events can share
          // a chunk).
          const end = chunk.indexOf("\n\n");
          res.write(end < 0 ? chunk : chunk.subarray(0, end + 2));
          setTimeout(() => { r.destroy(); res.destroy(); }, 20);
          return;
        }
        res.write(chunk);
        r.pipe(res);
      });
    });
    req.pipe(up);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    const pc = new ChatdClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, token, backoffMs: 10 });
    const reconnects: (string | undefined)[] = [];
    const ac = new AbortController();
    const events = await collect(pc.stream(created.chat.id, { signal: ac.signal, onReconnect: (i) => reconnects.push(i.lastEventId) }),
      (e) => e.type === "message" && e.data.structured_output?.status === "succeeded");
    ac.abort();
    assert.ok(reconnects.length >= 1, "the cut connection was resumed");
    const ids = events.flatMap((e) => (e.type === "message" ? [e.data.id] : []));
    assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), "no message twice, in order");
    assert.ok(seen.slice(1).some((h) => h !== undefined), "a reconnect sent Last-Event-ID");
    const last = events.at(-1);
    assert.ok(last?.type === "message" && last.data.structured_output?.request_id === requestId);
  } finally {
    proxy.closeAllConnections();
    proxy.close();
  }
});

test("partials yields typed partial values, each growing, then the receipt", async () => {
  // "partials-test": the model first calls the client tool "ready", so the
  // stream is open before it writes the value (internal/jstest).
  const Doc = z.object({ title: z.string(), items: z.array(z.object({ name: z.string(), tags: z.array(z.string()) })) });
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({
    content: [{ type: "text", text: "partials-test: write the document." }],
    response_format: responseFormat("doc", Doc),
    dynamic_tools: [{ name: "ready", description: "Say that you are ready.", input_schema: { type: "object" } }],
  });
  const requestId = created.messages[0]?.structured_output_request_id ?? "";
  const ac = new AbortController();
  const signal = AbortSignal.any([ac.signal, AbortSignal.timeout(60_000)]);
  const events = c.stream(created.chat.id, { signal });
  let ev: IteratorResult<StreamEvent>;
  do ev = await events.next();
  while (!ev.done && ev.value.type !== "action_required");
  assert.ok(!ev.done && ev.value.type === "action_required");
  const call = ev.value.data.tool_calls[0];
  assert.ok(call);
  await c.submitToolResults(created.chat.id, { results: [{ tool_call_id: call.tool_call_id, output: "ready" }] });

  const got: PartialEvent<z.infer<typeof Doc>>[] = [];
  for await (const p of partials(events, requestId, { schema: Doc })) got.push(p);
  ac.abort();
  const receipt = got.at(-1);
  assert.ok(receipt?.type === "receipt" && receipt.output.status === "succeeded");
  const title: string | undefined = receipt.value?.title; // typed by zod
  assert.ok(title);
  const previews = got.slice(0, -1);
  assert.ok(previews.length >= 2, `${previews.length} partials`);
  let prevTitle = "";
  let prevItems = 0;
  for (const p of previews) {
    assert.ok(p.type === "partial" && p.data.request_id === requestId);
    const t: string | undefined = p.value.title; // a partial: members may be missing
    assert.ok((t ?? "").startsWith(prevTitle), `${t} grows from ${prevTitle}`);
    assert.ok((p.value.items?.length ?? 0) >= prevItems);
    prevTitle = t ?? "";
    prevItems = p.value.items?.length ?? 0;
  }
  const last = previews.at(-1);
  assert.ok(last?.type === "partial");
  assert.deepEqual(last.value, receipt.value, "the last partial is the receipt's value");
});

test("partials of a request followed after the model began writing start from the first value", async () => {
  // "partials-late": the model writes from the create on, 150 ms a fragment
  // (internal/jstest); partials() is called once a first stream saw it write.
  const Doc = z.object({ title: z.string(), items: z.array(z.object({ name: z.string(), tags: z.array(z.string()) })) });
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({
    content: [{ type: "text", text: "partials-late: write the document." }],
    response_format: responseFormat("doc", Doc),
  });
  const requestId = created.messages[0]?.structured_output_request_id ?? "";
  const signal = AbortSignal.timeout(60_000);
  let writing = 0;
  for await (const ev of c.stream(created.chat.id, { signal })) {
    if (ev.type === "message_part" && ev.data.part.type === "tool-call" && (ev.data.part.args_delta ?? "") !== "") writing = ev.data.seq;
    if (writing > 0) break;
  }
  const got: PartialEvent<z.infer<typeof Doc>>[] = [];
  for await (const p of c.partials(created.chat.id, requestId, { schema: Doc, signal })) got.push(p);
  const receipt = got.at(-1);
  assert.ok(receipt?.type === "receipt" && receipt.output.status === "succeeded");
  const previews = got.slice(0, -1);
  assert.ok(previews.length >= 3, `${previews.length} partials after joining at fragment ${writing}`);
  let prevTitle = "";
  for (const p of previews) {
    assert.ok(p.type === "partial");
    const t = p.value.title ?? "";
    assert.ok(t.startsWith(prevTitle), `${t} grows from ${prevTitle}`);
    prevTitle = t;
  }
  const last = previews.at(-1);
  assert.ok(last?.type === "partial");
  assert.deepEqual(last.value, receipt.value, "the last partial is the receipt's value");
});

test("a failed turn is a server error event, not a transport error", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({ content: [{ type: "text", text: "provider-fail please" }] });
  const reconnects: unknown[] = [];
  const signal = AbortSignal.timeout(60_000);
  const events = await collect(c.stream(created.chat.id, { signal, onReconnect: (i) => reconnects.push(i.cause) }),
    (e) => e.type === "error");
  const last = events.at(-1);
  assert.ok(last?.type === "error", `the stream yielded an error event (got ${JSON.stringify(events.map((e) => e.type))})`);
  assert.equal(last.data.code, "provider_error");
  assert.ok(last.data.message);
  assert.deepEqual(reconnects, [], "no transport error on the way");
  const status = events.find((e) => e.type === "status" && e.data.status === "error");
  if (status?.type === "status") assert.equal(status.data.last_error?.code, "provider_error");
});

test("an abort ends waitStructuredOutput and stream at once", async () => {
  // "hold-me" keeps the provider call waiting: the request stays pending.
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({
    content: [{ type: "text", text: "hold-me: report." }],
    response_format: responseFormat("report", Report),
  });
  const requestId = created.messages[0]?.structured_output_request_id ?? "";
  const ac = new AbortController();
  const waiting = c.waitStructuredOutput(requestId, { signal: ac.signal });
  const events = c.stream(created.chat.id, { signal: ac.signal });
  const first = await events.next(); // connected: the history is coming
  assert.equal(first.done, false);
  const started = Date.now();
  ac.abort();
  await assert.rejects(waiting, (err: unknown) => err instanceof Error && err.name === "AbortError");
  assert.deepEqual(await events.next(), { done: true, value: undefined }, "the stream ends, without an error");
  assert.ok(Date.now() - started < 5000, "the 30 s long poll did not run out");
  // The request is still pending; an interrupt cancels it, with a typed error.
  assert.equal((await c.getStructuredOutput(requestId)).status, "pending");
  await c.interrupt(created.chat.id);
  const res = await c.waitStructuredOutput(requestId, { schema: Report });
  assert.ok(res.status === "cancelled" && res.error.code === "interrupted", JSON.stringify(res));
});

test("a stream of a chat that does not exist ends with a ChatdError 404", async () => {
  const c = new ChatdClient({ baseUrl, token });
  await assert.rejects(collect(c.stream(randomUUID()), () => true), (err: unknown) => err instanceof ChatdError && err.status === 404);
});

test("watch yields chat events", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({ content: [{ type: "text", text: "Watch me." }] });
  const ac = new AbortController();
  for await (const e of c.watch({ signal: ac.signal })) {
    if (e.type === "chat" && e.data.id === created.chat.id) break;
  }
  ac.abort();
});

test("eventSourceUrl carries a single-use ticket", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({ content: [{ type: "text", text: "Ticket." }] });
  const url = await c.eventSourceUrl(created.chat.id, { afterId: 0 });
  assert.match(url, /\/stream\?.*ticket=cst_/);
  const first = await fetch(url, { headers: { Accept: "text/event-stream" } });
  assert.equal(first.status, 200);
  await first.body?.cancel();
  const again = await fetch(url);
  assert.equal(again.status, 401);
  // A reconnection resumes after an event id (Last-Event-ID's form).
  const resumed = await c.eventSourceUrl(created.chat.id, { after: "1:1:1:3" });
  assert.match(resumed, /\/stream\?after=1%3A1%3A1%3A3&ticket=cst_/);
  const res = await fetch(resumed, { headers: { Accept: "text/event-stream" } });
  assert.equal(res.status, 200);
  await res.body?.cancel();
  const bad = await c.eventSourceUrl(created.chat.id, { after: "1:2" });
  assert.equal((await fetch(bad)).status, 400);
});

// The app's identity provider (zitadel/oidc's example, started by the
// driver): two users' ID tokens, the first user's subject, an admin token.
const jwtA = process.env["CHATD_JWT_A"] ?? "";
const jwtB = process.env["CHATD_JWT_B"] ?? "";
const subjectA = process.env["CHATD_SUBJECT_A"] ?? "";
const adminToken = process.env["CHATD_ADMIN_TOKEN"] ?? "";

test("a JWT from a token function: each user sees only their chats", async () => {
  let asked = 0;
  const a = new ChatdClient({ baseUrl, token: jwtSource(async () => (asked++, jwtA)) });
  const b = new ChatdClient({ baseUrl, token: jwtB });
  const created = await a.createChat({ content: [{ type: "text", text: "Signed in with a JWT." }] });
  assert.equal((await a.getChat(created.chat.id)).id, created.chat.id);
  await assert.rejects(b.getChat(created.chat.id), (e: unknown) => e instanceof ChatdError && e.status === 404);
  const ac = new AbortController();
  for await (const e of a.stream(created.chat.id, { signal: ac.signal })) {
    if (e.type === "status") break;
  }
  ac.abort();
  assert.equal(asked, 1, "the JWT, valid for an hour, was fetched once");
});

test("jwtSource fetches again before the JWT expires, once for concurrent calls", async () => {
  const fake = (expIn: number) =>
    `e30.${Buffer.from(JSON.stringify({ exp: Math.floor(Date.now() / 1000) + expIn })).toString("base64url")}.sig`;
  let fetched = 0;
  const soon = jwtSource(async () => (fetched++, fake(30)));
  await Promise.all([soon(), soon(), soon()]);
  assert.equal(fetched, 1, "concurrent calls share one fetch");
  await soon();
  assert.equal(fetched, 2, "a JWT 30 s from its exp is within the 60 s margin: fetched again");
  let later = 0;
  const hour = jwtSource(async () => (later++, fake(3600)));
  await hour();
  await hour();
  assert.equal(later, 1);
});

test("the token API, and a backend acting for a user by subject", async () => {
  const admin = new ChatdClient({ baseUrl, token: adminToken });
  const made = await admin.createToken({ user: "sdk-backend", act_as: true, scopes: ["read"] });
  assert.match(made.secret, /^chatd_/);
  assert.deepEqual(made.token.scopes, ["read"]);
  const listed = await admin.listTokens({ user: "sdk-backend" });
  assert.equal(listed.tokens.length, 1);
  assert.ok(!JSON.stringify(listed).includes(made.secret));
  const users = await admin.listUsers({ limit: 1000 });
  assert.ok(users.users.some((u) => u.subject === subjectA && u.name.startsWith("idp:")));
  const backend = new ChatdClient({ baseUrl, token: made.secret, actAs: subjectA });
  const a = new ChatdClient({ baseUrl, token: jwtA });
  const mine = (await a.listChats()).chats.map((c) => c.id).sort();
  assert.deepEqual((await backend.listChats()).chats.map((c) => c.id).sort(), mine);
  await assert.rejects(backend.createChat({ content: [{ type: "text", text: "x" }] }), (e: unknown) => e instanceof ChatdError && e.status === 403);
  await admin.revokeToken(made.token.id);
  await assert.rejects(backend.listChats(), (e: unknown) => e instanceof ChatdError && e.status === 401);
});

test("export and delete a chat; export and erase a user (admin)", async () => {
  const c = new ChatdClient({ baseUrl, token });
  const created = await c.createChat({ content: [{ type: "text", text: "hold-me: export then delete" }] });
  const types: string[] = [];
  for await (const line of c.exportChat(created.chat.id)) types.push(line.type);
  assert.equal(types[0], "chatd_export");
  assert.equal(types.at(-1), "end");
  assert.ok(types.includes("chat") && types.includes("message"));
  const deleted = await c.deleteChat(created.chat.id);
  assert.deepEqual(deleted.deleted_chat_ids, [created.chat.id]);
  await assert.rejects(c.deleteChat(created.chat.id), (e: unknown) => e instanceof ChatdError && e.status === 404 && /was deleted/.test(e.message));
  await assert.rejects(c.getChat(created.chat.id), (e: unknown) => e instanceof ChatdError && e.status === 404);

  const admin = new ChatdClient({ baseUrl, token: adminToken });
  const made = await admin.createToken({ user: "sdk-erased" });
  const erased = new ChatdClient({ baseUrl, token: made.secret });
  await erased.createChat({ content: [{ type: "text", text: "hold-me: sentinel" }] });
  let chats = 0;
  for await (const line of admin.exportUser("sdk-erased")) if (line.type === "chat") chats++;
  assert.equal(chats, 1);
  await assert.rejects(erased.eraseUser("sdk-erased"), (e: unknown) => e instanceof ChatdError && e.status === 403);
  const report = await admin.eraseUser("sdk-erased");
  assert.equal(report.user, "sdk-erased");
  assert.equal(report.chats, 1);
  assert.equal(report.tokens, 1);
  await assert.rejects(admin.eraseUser("sdk-erased"), (e: unknown) => e instanceof ChatdError && e.status === 404);
});
