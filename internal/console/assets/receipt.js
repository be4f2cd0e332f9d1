// How a structured request's outcome is shown, in a chat and in the lookup.

import { h, badge, pretty, time } from "./dom.js";

/**
 * A receipt (or a lookup result): status, the value as pretty JSON (a
 * successful null included), or the error code and message.
 * @param {{request_id: string, status: string, value?: unknown, error?: {code: string, message: string}}} so
 * @param {{heading?: string, chatId?: string, messageId?: number, at?: string}} [options]
 */
export function receiptCard(so, { heading = "Receipt", chatId, messageId, at } = {}) {
  /** @type {HTMLElement[]} */
  const rows = [
    h("div", { class: "receipt-head" }, h("strong", {}, heading), " ", badge(so.status)),
    h("p", { class: "meta" }, "request ", h("a", { href: "#/lookup/" + so.request_id }, h("code", {}, so.request_id))),
  ];
  if (chatId) {
    rows.push(h("p", { class: "meta" }, "chat ", h("a", { href: "#/chats/" + chatId }, h("code", {}, chatId)),
      messageId ? ` · receipt message ${messageId}` : ""));
  }
  if ("value" in so) rows.push(h("pre", { class: "value", tabindex: 0, "aria-label": "Value" }, pretty(so.value)));
  if (so.error) {
    rows.push(h("p", { class: "error-line" }, h("code", { class: "code-name" }, so.error.code), " ", so.error.message));
  }
  if (at) rows.push(h("p", { class: "meta receipt-time" }, time(at)));
  return h("div", { class: `receipt s-${so.status}`, "data-status": so.status, "data-request": so.request_id }, rows);
}
