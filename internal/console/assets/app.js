// The chatd console: hash routes, one view at a time. Every view gets an
// AbortSignal that ends its streams and requests when it is left.

import { api, token, tokensFromParent, APIError } from "./api.js";
import { h, field, showErrors } from "./dom.js";
import { messageFields, alertLine } from "./forms.js";
import { chatsView } from "./chats.js";
import { chatView } from "./chat.js";
import { lookupView } from "./lookup.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let leave = new AbortController();
let notice = "";

/** @type {Array<[RegExp, (m: RegExpMatchArray, signal: AbortSignal) => HTMLElement]>} */
const routes = [
  [/^#\/chats\/([0-9a-f-]{36})$/i, (m, signal) => chatView(m[1], signal)],
  [/^#\/new$/, () => newChatView()],
  [/^#\/lookup(?:\/([^/]+))?$/, (m, signal) => lookupView(m[1] ? decodeURIComponent(m[1]) : "", signal)],
  [/^(#\/chats)?$/, (m, signal) => chatsView(signal)],
];

function route() {
  leave.abort();
  leave = new AbortController();
  const signedIn = token.get() !== "";
  nav.hidden = !signedIn;
  let view;
  if (!signedIn) view = signInView();
  else {
    const hash = location.hash === "#/" ? "" : location.hash;
    for (const [re, render] of routes) {
      const m = hash.match(re);
      if (m) {
        view = render(m, leave.signal);
        break;
      }
    }
    view ??= h("section", {}, h("h1", { tabindex: -1 }, "Not found"), h("p", {}, h("a", { href: "#/chats" }, "Back to the chats")));
  }
  for (const a of nav.querySelectorAll("a")) {
    if (location.hash.startsWith(a.getAttribute("href"))) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  main.replaceChildren(view);
  // Move focus to the new view's heading, as a page load would.
  view.querySelector("h1")?.focus();
}

function signInView() {
  const tok = field("signin-token", "API token or JWT", h("input", { type: "password", autocomplete: "off", spellcheck: "false" }),
    "From chatd token create --user NAME, or a JWT of the app's identity provider. It stays in this tab (sessionStorage) and is sent as Authorization: Bearer.");
  const alert = alertLine();
  alert.textContent = notice;
  notice = "";
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h("form", {
    class: "card narrow", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      const t = tok.control.value.trim();
      if (!t) return tok.err("Paste a token."), tok.control.focus();
      submit.disabled = true;
      token.set(t);
      try {
        await api("GET", "/chats?limit=1", undefined, { quiet401: true });
        route();
      } catch (err) {
        token.clear();
        tok.err(err instanceof APIError && err.status === 401 ? `The server refused this token: ${err.message}` : String(err.message || err));
        tok.control.focus();
      } finally {
        submit.disabled = false;
      }
    },
  }, h("h1", { tabindex: -1 }, "Sign in"), tok.wrap, alert, submit);
  return form;
}

function newChatView() {
  const msg = messageFields("new");
  const title = field("new-title", "Title (optional)", h("input", { type: "text", autocomplete: "off" }), "Omitted: the message's first line.");
  const model = field("new-model", "Model (optional)", h("input", { type: "text", autocomplete: "off", spellcheck: "false" }), "A model id of the server; omitted: its default.");
  const alert = alertLine();
  const fields = { ...msg.fields, title, model };
  const submit = h("button", { type: "submit" }, "Create chat");
  return h("form", {
    class: "card", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      const body = msg.body();
      if (!body) return;
      if (title.control.value.trim()) body.title = title.control.value.trim();
      if (model.control.value.trim()) body.model = model.control.value.trim();
      submit.disabled = true;
      alert.textContent = "";
      try {
        const res = await api("POST", "/chats", body, { idempotent: true });
        location.hash = "#/chats/" + res.chat.id;
      } catch (err) {
        if (err instanceof APIError) showErrors(err, fields, alert);
        else alert.textContent = String(err.message || err);
        if (err.validations?.some((v) => v.field.startsWith("response_format"))) msg.details.open = true;
      } finally {
        submit.disabled = false;
      }
    },
  }, h("h1", { tabindex: -1 }, "New chat"), msg.wrap[0], title.wrap, model.wrap, msg.wrap[1], alert, submit);
}

document.getElementById("signout").addEventListener("click", () => {
  token.clear();
  location.hash = "";
  route();
});
addEventListener("chatd:signed-out", () => {
  notice = "The server refused the token (revoked or expired?): sign in again.";
  route();
});
addEventListener("hashchange", route);
tokensFromParent(route);
route();
