// The turn reader without a server: seeded random deliveries of a step's
// preview fragments (joined late, with gaps, coalesced catch-ups, split
// pieces, abandoned generations, reconnections) must always end with
// exactly the committed text: nothing lost, nothing doubled.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ChatMessage, StreamEvent } from "@chatd/client";
import { readTurn, type Piece } from "../src/turn.js";

/** A small seeded PRNG (mulberry32), so a failure replays. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const chat = "00000000-0000-4000-8000-000000000001";
const message = (id: number, role: "user" | "assistant", text: string, reasoning = ""): StreamEvent => ({
  type: "message",
  id,
  data: {
    id,
    chat_id: chat,
    role,
    created_at: "",
    content: [...(reasoning ? [{ type: "reasoning" as const, text: reasoning }] : []), { type: "text" as const, text }],
  } as ChatMessage,
});
const part = (hv: number, seq: number, kind: "text" | "reasoning", text: string, from?: number): StreamEvent => ({
  type: "message_part",
  data: { history_version: hv, generation_attempt: 1, seq, role: "assistant", part: { type: kind, text }, ...(from !== undefined ? { from_seq: from } : {}) },
} as StreamEvent);

/** What the UI shows per step, reset-step taken back. */
function renderUI(pieces: Piece[], kind: "text" | "reasoning"): string[] {
  let step: string[] = [];
  const done: string[] = [];
  for (const p of pieces) {
    if (p.type === "step-start" || p.type === "step-reset") step = [];
    if (p.type === "block-delta" && p.kind === kind) step.push(p.delta);
    if (p.type === "step-end") done.push(step.join(""));
  }
  return done;
}

/** All the text a model stream sent (it cannot take anything back). */
const renderModel = (pieces: Piece[]) => pieces.flatMap((p) => (p.type === "block-delta" && p.kind === "text" ? [p.delta] : [])).join("");

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const ABANDONED = "abandoned words";
// Any prefix of the abandoned generation's text (what a stream showed of it).
const abandonedPrefix = `(?:${Array.from({ length: ABANDONED.length + 1 }, (_, n) => escape(ABANDONED.slice(0, n))).join("|")})`;

/**
 * One step's fragments (its reasoning, then its text, numbered by one
 * counter from 1 as the server does) as a random stream would deliver
 * them: joined late (with or without a coalesced catch-up of what it
 * lacked), fragments lost, gaps announced, fragments split into pieces.
 */
function delivery(r: () => number, hv: number, segments: [kind: "text" | "reasoning", text: string][]): StreamEvent[] {
  const frags: [kind: "text" | "reasoning", text: string][] = [];
  for (const [kind, text] of segments) {
    for (let i = 0; i < text.length; ) {
      const n = 1 + Math.floor(r() * 6);
      frags.push([kind, text.slice(i, i + n)]);
      i += n;
    }
  }
  const out: StreamEvent[] = [];
  let seq = 1 + (r() < 0.2 ? Math.floor(r() * frags.length) : 0); // joins late
  if (seq > 1 && r() < 0.5 && frags.slice(0, seq - 1).every(([k]) => k === frags[0]?.[0])) {
    // a catch-up: the fragments it lacked, coalesced into one part of one kind
    out.push(part(hv, seq - 1, frags[0]?.[0] ?? "text", frags.slice(0, seq - 1).map(([, t]) => t).join(""), 1));
  }
  for (; seq <= frags.length; seq++) {
    if (r() < 0.05) continue; // lost
    if (r() < 0.03) out.push({ type: "preview_reset", data: { history_version: hv, generation_attempt: 1 } });
    const [kind, f] = frags[seq - 1] ?? ["text", ""];
    if (f.length > 1 && r() < 0.2) {
      // split into pieces sharing the fragment's number
      out.push(part(hv, seq, kind, f.slice(0, 1)), part(hv, seq, kind, f.slice(1)));
    } else {
      out.push(part(hv, seq, kind, f));
    }
  }
  return out;
}

test("random deliveries of previews end with exactly the committed text", async () => {
  const words = "the quick brown fox jumps over a lazy dog while chatd keeps every receipt durable".split(" ");
  for (let seed = 1; seed <= 400; seed++) {
    const r = rng(seed);
    const steps = 1 + Math.floor(r() * 3);
    const events: StreamEvent[] = [{ type: "status", data: { status: "running" } } as StreamEvent];
    const texts: string[] = [];
    const reasonings: string[] = [];
    const abandoned: boolean[] = [];
    let id = 10;
    for (let s = 0; s < steps; s++) {
      const text = Array.from({ length: 1 + Math.floor(r() * 12) }, () => words[Math.floor(r() * words.length)]).join(" ");
      const reasoning = r() < 0.5 ? `thinking ${s} ${text.slice(0, 9)}` : "";
      const hv = 100 + s;
      if (s > 0) events.push({ type: "preview_reset", data: { history_version: hv, generation_attempt: 1 } });
      abandoned.push(r() < 0.15);
      if (abandoned[s]) {
        // a generation the server abandons (attempt 1), then attempt 2 commits
        events.push(...delivery(r, hv, [["text", ABANDONED]]));
        events.push({ type: "preview_reset", data: { history_version: hv, generation_attempt: 2 } });
        for (const e of delivery(r, hv, [["text", text]])) {
          events.push(e.type === "message_part" || e.type === "preview_reset" ? ({ ...e, data: { ...e.data, generation_attempt: 2 } } as StreamEvent) : e);
        }
      } else {
        events.push(...delivery(r, hv, [["reasoning", reasoning], ["text", text]]));
      }
      // a step with more to come calls a server tool; the last ends the turn
      const m = message(++id, "assistant", text, abandoned[s] ? "" : reasoning) as Extract<StreamEvent, { type: "message" }>;
      if (s < steps - 1) m.data.content.push({ type: "tool-call", tool_call_id: `call_${s}`, tool_name: "read_file", args: {} });
      events.push(m);
      texts.push(text);
      reasonings.push(abandoned[s] ? "" : reasoning);
    }
    for (const retract of [true, false]) {
      const pieces: Piece[] = [];
      const out = await readTurn(
        (async function* () {
          yield* events;
        })(),
        { anchor: { after: 10 }, requestId: undefined, clientTools: new Set(), retract, opened: false, emit: (p) => pieces.push(p) },
      );
      assert.equal(out.type, "done", `seed ${seed}`);
      if (retract) {
        assert.deepEqual(renderUI(pieces, "text"), texts, `seed ${seed}: the UI shows each step's committed text`);
        assert.deepEqual(renderUI(pieces, "reasoning"), reasonings, `seed ${seed}: and its committed reasoning`);
      } else {
        // Apart from what it showed of an abandoned generation, the model
        // stream's text is each step's committed text, once.
        const want = new RegExp(`^${texts.map((t, i) => (abandoned[i] ? abandonedPrefix : "") + escape(t)).join("")}$`);
        assert.match(renderModel(pieces), want, `seed ${seed}`);
      }
    }
  }
});
