// One chat: its history, queue, pending tool calls and the preview of what
// the model is writing, live over the chat's stream; forms to send, edit,
// interrupt, delete queued messages and delete the chat (after a confirm).

import { api, followChat, APIError } from "./api.js";
import { h, badge, pretty, time, showErrors, announce } from "./dom.js";
import { messageFields, alertLine } from "./forms.js";
import { receiptCard } from "./receipt.js";

const busy = new Set(["running", "requires_action", "interrupting"]);
const FINALIZER = "coder_structured_output";

export function chatView(id, signal) {
  const st = { chat: null, statuses: 0, messages: new Map(), queue: [], calls: [], preview: null, error: null, editing: new Map() };

  const head = h("div", { class: "chat-head" });
  const conn = h("span", { class: "conn", role: "status" }, "connecting…");
  const alert = alertLine();
  const history = h("ol", { class: "history", "aria-label": "History" });
  const preview = h("section", { class: "preview", hidden: true, "aria-label": "Preview" });
  const calls = h("section", { class: "calls", hidden: true });
  const queue = h("section", { class: "queue", hidden: true });
  const interrupt = h("button", { type: "button", class: "danger", disabled: true, onclick: () => doInterrupt() }, "Interrupt");
  // Deleting asks first, in the page: what goes, and a button that does it.
  const remove = h("button", { type: "button", class: "danger", id: "delete-chat", onclick: () => askDelete(true) }, "Delete chat");
  const cancelDelete = h("button", { type: "button", id: "delete-cancel", onclick: () => askDelete(false) }, "Cancel");
  const confirmDelete = h("div", { class: "confirm", role: "alertdialog", "aria-labelledby": "delete-question", hidden: true },
    h("p", { id: "delete-question" }, "Delete this chat, its child chats and everything in them? A running turn stops and " +
      "pending structured requests are cancelled (chat_deleted). This cannot be undone."),
    h("div", { class: "buttons" },
      h("button", { type: "button", class: "danger", id: "delete-confirm", onclick: () => doDelete() }, "Delete"), cancelDelete));

  // The latest message, when it is a receipt: how the last turn ended.
  const lastReceipt = () => {
    const last = [...st.messages.values()].reduce((a, m) => (!a || m.id > a.id ? m : a), null);
    return last?.structured_output;
  };
  // The same failure as the chat's last error (the receipt already shows it).
  const sameError = (e) => !!e && [lastReceipt()?.error, st.chat?.last_error].some((x) => x && x.code === e.code && x.message === e.message);

  const renderHead = () => {
    const c = st.chat;
    if (!c) return;
    const focused = head.contains(document.activeElement);
    const receipt = lastReceipt();
    const failure = c.status === "error" && c.last_error;
    head.replaceChildren(...[
      h("div", { class: "title-row" }, h("h1", { tabindex: -1 }, c.title || "(untitled)"), badge(c.status), conn),
      h("p", { class: "meta" }, c.model, " · ", c.mode, " · ", h("code", {}, c.id), " · updated ", time(c.updated_at)),
      // Each failure once: not here when the last receipt says it.
      failure && !(receipt?.error && receipt.error.code === failure.code && receipt.error.message === failure.message)
        ? h("p", { class: "error-line" }, h("code", {}, failure.code || "error"), " ", failure.message) : null,
      // chatd waits to call the model provider again (docs/streams.md).
      busy.has(c.status) && c.provider_retry ? h("p", { class: "retry-line", role: "status" }, "Retrying the model provider: attempt ",
        String(c.provider_retry.attempt), " of ", String(c.provider_retry.max_attempts), " failed (", c.provider_retry.last_error,
        "); next try at ", time(c.provider_retry.next_try_at), ".") : null].filter(Boolean));
    if (focused) head.querySelector("h1").focus();
    head.dataset.status = c.status;
    interrupt.disabled = !busy.has(c.status);
  };

  // The stream's error, unless the head or a receipt shows the same.
  const renderAlert = () => {
    const e = st.error;
    if (!e) return;
    const text = e.code ? `${e.code}: ${e.message}` : e.message;
    if (!sameError(e)) alert.textContent = text;
    else if (alert.textContent === text) alert.textContent = "";
  };

  const renderHistory = () => {
    const rows = [...st.messages.values()].sort((a, b) => a.id - b.id);
    const receipts = new Set(rows.filter((m) => m.structured_output).map((m) => m.structured_output.request_id));
    history.replaceChildren(...rows.map((m) => st.editing.get(m.id) || messageItem(m, receipts)));
  };

  const messageItem = (m, receipts) => {
    if (m.structured_output) {
      return h("li", { class: "msg receipt-msg", "data-id": m.id }, receiptCard(m.structured_output, { at: m.created_at }));
    }
    const req = m.structured_output_request_id;
    return h("li", { class: `msg r-${m.role}`, "data-id": m.id },
      h("div", { class: "msg-head" }, h("strong", {}, m.role), " ", time(m.created_at),
        m.role === "user" ? h("button", { type: "button", class: "link", onclick: () => startEdit(m), "aria-label": `Edit message ${m.id}` }, "Edit") : null),
      m.content.map(partView),
      req ? h("p", { class: "meta" }, "asks for structured output: request ", h("a", { href: "#/lookup/" + req }, h("code", {}, req)),
        receipts.has(req) ? "" : " (pending)") : null);
  };

  const renderPreview = () => {
    const p = st.preview;
    preview.hidden = !p || p.parts.length === 0;
    if (preview.hidden) return preview.replaceChildren();
    preview.replaceChildren(h("h2", {}, "Writing… ", h("span", { class: "muted" }, "(preview, not a result)")),
      ...p.parts.map((x) => x.type === "tool-call"
        ? h("div", { class: "part tool" }, h("div", { class: "part-label" }, x.name === FINALIZER ? "Partial value (candidate, not a result)" : "Tool call " + x.name),
          // The finalizer's value as the server parsed it so far (the last
          // structured_output_partial), not its raw arguments.
          x.name === FINALIZER
            ? h("pre", { class: "partial" }, x.value === undefined ? "…" : pretty(x.value))
            : h("pre", {}, x.text))
        : h("div", { class: `part ${x.type}` }, x.type === "reasoning" ? h("div", { class: "part-label" }, "Reasoning") : null, h("p", { class: "text" }, x.text))));
  };

  const renderCalls = () => {
    calls.hidden = st.calls.length === 0 || st.chat?.status !== "requires_action";
    calls.replaceChildren(h("h2", {}, "Waiting for client tool results"),
      h("ul", {}, st.calls.map((c) => h("li", {}, h("code", {}, c.tool_name), " ", h("span", { class: "meta" }, c.tool_call_id), h("pre", {}, pretty(c.args))))),
      h("p", { class: "help" }, "Answered by the client that declared the tools (POST …/tool-results)."));
  };

  const renderQueue = () => {
    queue.hidden = st.queue.length === 0;
    queue.replaceChildren(h("h2", {}, `Queued (${st.queue.length})`),
      h("ol", {}, st.queue.map((q) => h("li", { "data-queued": q.id },
        h("p", { class: "text" }, q.content.map((p) => p.text || "").join(" ")),
        q.structured_output_request_id ? h("p", { class: "meta" }, "request ", h("code", {}, q.structured_output_request_id)) : null,
        h("button", { type: "button", class: "danger", onclick: () => deleteQueued(q.id), "aria-label": `Delete queued message ${q.id}` }, "Delete")))));
  };

  const onEvent = (name, d) => {
    switch (name) {
      case "message": {
        if (d.role === "assistant") endRetry();
        const fresh = !st.messages.has(d.id);
        st.messages.set(d.id, d);
        if (fresh && d.structured_output) announce(`Receipt ${d.structured_output.status} for request ${d.structured_output.request_id}.`);
        renderHead();
        renderAlert();
        return renderHistory();
      }
      case "message_part": endRetry(); return addPart(d);
      case "provider_retry": if (st.chat) { st.chat.provider_retry = d; renderHead(); } return;
      case "structured_output_partial": return addPartial(d);
      case "preview_reset": st.preview = null; return renderPreview();
      case "status":
        st.chat = d;
        st.statuses++;
        if (!busy.has(d.status)) { st.preview = null; renderPreview(); }
        if (d.pending_tool_calls) st.calls = d.pending_tool_calls;
        renderHead(); renderAlert(); return renderCalls();
      case "queue": st.queue = d.queued_messages; return renderQueue();
      case "action_required": st.calls = d.tool_calls; return renderCalls();
      case "history_reset": // a reconnection starts again: the preview comes again too
        st.messages.clear();
        st.preview = null;
        renderPreview();
        return renderHistory();
      case "error": st.error = d; return renderAlert();
    }
  };

  // A step's fragment or message means the provider answered: the retry
  // is over (the chat's provider_retry is cleared without a status event).
  const endRetry = () => {
    if (!st.chat?.provider_retry) return;
    st.chat.provider_retry = undefined;
    renderHead();
  };

  const previewOf = (d) => {
    let p = st.preview;
    if (!p || p.hv !== d.history_version || p.attempt !== d.generation_attempt) p = st.preview = { hv: d.history_version, attempt: d.generation_attempt, parts: [] };
    return p;
  };

  // A partial value belongs to the finalizer call being written: the last
  // one of the preview (the call's fragments come before its values).
  const addPartial = (d) => {
    const x = previewOf(d).parts.findLast((y) => y.type === "tool-call" && y.name === FINALIZER);
    if (!x) return;
    x.value = d.value;
    renderPreview();
  };

  const addPart = (d) => {
    const p = previewOf(d);
    const part = d.part, last = p.parts.at(-1);
    if (part.type === "tool-call") {
      let x = p.parts.find((y) => y.type === "tool-call" && y.id === part.tool_call_id);
      if (!x) p.parts.push(x = { type: "tool-call", id: part.tool_call_id, name: part.tool_name || "", text: "" });
      x.text += part.args_delta || "";
      x.name ||= part.tool_name || "";
    } else if (last && last.type === part.type) last.text += part.text || "";
    else p.parts.push({ type: part.type, text: part.text || "" });
    renderPreview();
  };

  const doInterrupt = async () => {
    alert.textContent = "";
    try {
      const seen = st.statuses;
      const c = await api("POST", `/chats/${id}/interrupt`, undefined, { signal });
      // The stream may already have said what came after the answer (the
      // turn ended: "waiting"); the answer must not overwrite that.
      if (st.statuses === seen) { st.chat = c; renderHead(); }
    } catch (e) {
      if (!signal.aborted) alert.textContent = e.message;
    }
  };

  const askDelete = (ask) => {
    confirmDelete.hidden = !ask;
    remove.disabled = ask;
    (ask ? cancelDelete : remove).focus();
  };

  const doDelete = async () => {
    alert.textContent = "";
    try {
      await api("DELETE", `/chats/${id}`, undefined, { signal });
      announce("Chat deleted.");
      location.hash = "#/chats";
    } catch (e) {
      if (!signal.aborted) alert.textContent = e.message;
      askDelete(false);
    }
  };

  const deleteQueued = async (q) => {
    alert.textContent = "";
    try {
      await api("DELETE", `/chats/${id}/queue/${q}`, undefined, { signal });
    } catch (e) {
      if (!signal.aborted) alert.textContent = e instanceof APIError && e.status === 404 ? "That message has already started or was deleted." : e.message;
    }
  };

  const startEdit = (m) => {
    const text = m.content.filter((p) => p.type === "text").map((p) => p.text).join("\n");
    const f = messageFields(`edit-${m.id}`, { text, label: `Replacement for message ${m.id}` });
    const err = alertLine();
    const done = () => { st.editing.delete(m.id); renderHistory(); };
    const form = h("form", {
      class: "edit", novalidate: true, onsubmit: async (e) => {
        e.preventDefault();
        const body = f.body();
        if (!body) return;
        try {
          await api("PATCH", `/chats/${id}/messages/${m.id}`, body, { signal });
          done();
        } catch (x) {
          if (x instanceof APIError) showErrors(x, f.fields, err); else err.textContent = x.message;
        }
      },
    }, f.wrap, h("p", { class: "help" }, "Replaces this message and discards everything after it; a running turn stops. Without a schema here, the message keeps its format."),
    err, h("div", { class: "buttons" }, h("button", { type: "submit" }, "Save edit"), h("button", { type: "button", onclick: done }, "Cancel")));
    st.editing.set(m.id, h("li", { class: "msg r-user editing", "data-id": m.id }, form));
    renderHistory();
    f.fields.content.control.focus();
  };

  const send = messageFields("send");
  const behavior = h("select", { id: "send-busy" }, h("option", { value: "queue" }, "queue it"), h("option", { value: "interrupt" }, "interrupt the turn"));
  const sendAlert = alertLine();
  const sendButton = h("button", { type: "submit" }, "Send");
  const sendForm = h("form", {
    class: "card send", novalidate: true, "aria-label": "Send a message", onsubmit: async (e) => {
      e.preventDefault();
      const body = send.body();
      if (!body) return;
      if (behavior.value !== "queue") body.busy_behavior = behavior.value;
      sendButton.disabled = true;
      sendAlert.textContent = "";
      try {
        const res = await api("POST", `/chats/${id}/messages`, body, { idempotent: true, signal });
        send.fields.content.control.value = "";
        announce(res.queued ? "Queued." : "Sent.");
      } catch (x) {
        if (x instanceof APIError) showErrors(x, send.fields, sendAlert); else if (!signal.aborted) sendAlert.textContent = x.message;
        if (x.validations?.some((v) => v.field.startsWith("response_format"))) send.details.open = true;
      } finally {
        sendButton.disabled = false;
      }
    },
  }, h("h2", {}, "Send"), send.wrap, h("div", { class: "field" }, h("label", { for: "send-busy" }, "If a turn is running"), behavior), sendAlert, sendButton);

  api("GET", `/chats/${id}`, undefined, { signal }).then((c) => {
    st.chat = st.chat || c;
    st.calls = c.pending_tool_calls || [];
    renderHead();
    renderCalls();
    followChat(id, signal, onEvent, (s, opened) => {
      conn.textContent = { live: "live", reconnecting: "reconnecting…", gone: "deleted" }[s];
      conn.dataset.state = s;
      if (opened) conn.dataset.connections = opened;
    });
  }, (e) => {
    if (signal.aborted) return;
    head.replaceChildren(h("h1", { tabindex: -1 }, "Chat not found"), h("p", {}, e.message, " ", h("a", { href: "#/chats" }, "Back to the chats")));
    head.querySelector("h1").focus();
  });

  return h("section", { class: "chat" },
    head.childElementCount ? head : (head.append(h("h1", { tabindex: -1 }, "Chat")), head),
    h("div", { class: "buttons" }, interrupt, remove), confirmDelete, alert, history, preview, calls, queue, sendForm);
}

function partView(p) {
  switch (p.type) {
    case "text": return h("p", { class: "text" }, p.text);
    case "reasoning": return h("details", { class: "part reasoning" }, h("summary", {}, "Reasoning"), h("p", { class: "text" }, p.text));
    case "tool-call": return h("div", { class: "part tool" }, h("div", { class: "part-label" }, "Tool call ", h("code", {}, p.tool_name)), h("pre", {}, pretty(p.args)));
    case "tool-result": return h("div", { class: `part tool${p.is_error ? " is-error" : ""}` },
      h("div", { class: "part-label" }, p.is_error ? "Tool error from " : "Result of ", h("code", {}, p.tool_name)), h("pre", {}, pretty(p.result)));
    default: return h("div", { class: "part" }, h("div", { class: "part-label" }, p.type), h("pre", {}, pretty(p)));
  }
}
