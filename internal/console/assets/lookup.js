// The request lookup: GET /structured-outputs/{request_id}, long-polled
// while the request is pending.

import { api, APIError } from "./api.js";
import { h, field } from "./dom.js";
import { receiptCard } from "./receipt.js";
import { alertLine } from "./forms.js";
import { config, traceURL } from "./config.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function lookupView(id, signal) {
  const input = field("lookup-id", "Request UUID", h("input", { type: "text", value: id, autocomplete: "off", spellcheck: "false", class: "code" }),
    "The structured_output_request_id a create, send or edit answered.");
  const alert = alertLine();
  const out = h("div", { class: "lookup-result", "aria-live": "polite" });
  const form = h("form", {
    class: "card", novalidate: true, role: "search", onsubmit: (e) => {
      e.preventDefault();
      const v = input.control.value.trim();
      if (!UUID.test(v)) return input.err("A request id is a UUID, like 5f1c0a2e-…"), input.control.focus();
      if (location.hash === "#/lookup/" + v) return;
      location.hash = "#/lookup/" + v;
    },
  }, input.wrap, alert, h("button", { type: "submit" }, "Look up"));

  const show = async () => {
    // A pending request is held by the server until it ends (at most 60 s a
    // call), so a result appears as soon as it is committed.
    for (let wait = ""; !signal.aborted; wait = "?wait=60s") {
      let res;
      try {
        res = await api("GET", `/structured-outputs/${id}${wait}`, undefined, { signal });
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof APIError && e.status === 404) {
          out.replaceChildren();
          return input.err("No request of yours has this id.");
        }
        alert.textContent = e.message;
        return;
      }
      const trace = traceURL((await config()).trace_url_template, res.trace_id);
      out.replaceChildren(...[receiptCard(res, { heading: res.status === "pending" ? "Request" : "Result", chatId: res.chat_id, messageId: res.receipt_message_id }),
        trace ? h("p", { class: "meta" }, "trace ", h("a", { href: trace, class: "trace-link", target: "_blank", rel: "noopener noreferrer" }, h("code", {}, res.trace_id))) : null,
        res.status === "pending" ? h("p", { class: "muted" }, "Pending: waiting for its receipt…") : null].filter(Boolean));
      if (res.status !== "pending") return;
    }
  };
  if (id) {
    if (UUID.test(id)) show(); else input.err("A request id is a UUID, like 5f1c0a2e-…");
  }
  return h("section", {}, h("h1", { tabindex: -1 }, "Look up a request"), form, out);
}
