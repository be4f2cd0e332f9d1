// The chat list: pages of GET /chats, kept live by the watch stream.

import { api, watchChats } from "./api.js";
import { h, badge, time } from "./dom.js";

const PAGE = 25;
const at = (c) => Date.parse(c.updated_at);

export function chatsView(signal) {
  const chats = new Map();
  let cursor = null;
  const list = h("ul", { class: "chats", "aria-label": "Chats, most recently active first" });
  const empty = h("p", { class: "muted", hidden: true }, "No chats yet. ", h("a", { href: "#/new" }, "Start one."));
  const conn = h("span", { class: "conn", role: "status" }, "connecting…");
  const alert = h("p", { class: "form-error", role: "alert" });
  const more = h("button", { type: "button", hidden: true, onclick: () => page() }, "Load older chats");

  // While older pages remain, a chat the watch reports that is older than
  // every listed one belongs to a later page: leave it to that page.
  const oldest = () => Math.min(...[...chats.values()].map(at));
  const upsert = (c, fromPage) => {
    const old = chats.get(c.id);
    if (old && at(old) > at(c)) return;
    if (!old && !fromPage && cursor && at(c) < oldest()) return;
    chats.set(c.id, c);
  };
  const render = () => {
    const rows = [...chats.values()].sort((a, b) => at(b) - at(a));
    list.replaceChildren(...rows.map((c) => h("li", { "data-chat": c.id, "data-status": c.status },
      h("a", { href: "#/chats/" + c.id }, c.title || "(untitled)"),
      " ", badge(c.status),
      h("span", { class: "meta" }, c.model, " · ", c.mode, " · ", time(c.updated_at)))));
    empty.hidden = rows.length > 0;
    more.hidden = !cursor;
  };
  const page = async () => {
    more.disabled = true;
    try {
      const q = `/chats?limit=${PAGE}` + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
      const res = await api("GET", q, undefined, { signal });
      cursor = res.next_cursor || null;
      res.chats.forEach((c) => upsert(c, true));
      render();
    } catch (e) {
      if (!signal.aborted) alert.textContent = e.message;
    } finally {
      more.disabled = false;
    }
  };

  page().then(() => watchChats(signal, (c) => { upsert(c, false); render(); },
    (s) => { conn.textContent = s === "live" ? "live" : "reconnecting…"; conn.dataset.state = s; }));

  return h("section", {},
    h("div", { class: "title-row" }, h("h1", { tabindex: -1 }, "Chats"), conn, h("a", { class: "button", href: "#/new" }, "New chat")),
    alert, list, empty, more);
}
