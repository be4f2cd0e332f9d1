// Small DOM helpers: elements are built with h(), never from HTML strings,
// so text from the server is always text.

/**
 * h("a", {href: "#/x", onclick: f}, "text", child, [more])
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} [attrs]
 * @param {...any} kids
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value" || k === "checked" || k === "disabled" || k === "hidden") el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  el.append(...kids.flat(Infinity).filter((x) => x !== null && x !== undefined && x !== false));
  return el;
}

/**
 * Words for a chat's statuses where the API's reads wrong to a person: an
 * idle chat ("waiting" for the user) has finished its turn, and "error"
 * is a turn that failed. Other statuses, and receipts', read as they are.
 * One word per status everywhere: the CLI prints the same
 * (client.ChatStatus.Word; console_test.go compares them).
 */
const words = { waiting: "finished", error: "failed" };

/**
 * A status badge, coloured by class.
 * @param {string} status
 */
export const badge = (status) => h("span", { class: `badge s-${status}`, "data-status": status }, (words[status] || status).replace("_", " "));

/** Pretty JSON of a value, as the server sent it. */
export const pretty = (v) => JSON.stringify(v, null, 2);

/** A relative-free, locale time (the full timestamp in the title). */
export function time(iso) {
  const d = new Date(iso);
  return h("time", { datetime: iso, title: iso }, d.toLocaleString());
}

/**
 * A labelled form field with its help and error lines, wired with
 * aria-describedby; err(msg) shows or clears its error.
 */
export function field(id, label, control, help) {
  control.id = id;
  const helpEl = help ? h("p", { class: "help", id: id + "-help" }, help) : null;
  const errEl = h("p", { class: "field-error", id: id + "-error", hidden: true });
  control.setAttribute("aria-describedby", [helpEl && helpEl.id, errEl.id].filter(Boolean).join(" "));
  const wrap = h("div", { class: "field" }, h("label", { for: id }, label), control, helpEl, errEl);
  const err = (msg) => {
    errEl.textContent = msg || "";
    errEl.hidden = !msg;
    if (msg) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  };
  return { wrap, control, err };
}

/**
 * Shows an API error on a form: each validation on the field whose name is
 * the longest prefix of its path (fields: {"content": f, …}), the rest in
 * the form's alert line. Focuses the first field at fault.
 */
export function showErrors(e, fields, alert) {
  Object.values(fields).forEach((f) => f.err(""));
  alert.textContent = "";
  const rest = [];
  let first = null;
  for (const v of e.validations || []) {
    const key = Object.keys(fields).filter((k) => v.field === k || v.field.startsWith(k + ".")).sort((a, b) => b.length - a.length)[0];
    if (key) {
      fields[key].err(`${v.field}: ${v.detail}`);
      first ??= fields[key].control;
    } else rest.push(`${v.field}: ${v.detail}`);
  }
  alert.textContent = [e.message, ...rest].join(" ");
  first?.focus();
}

/** Announces a sentence to screen readers. */
export function announce(text) {
  const live = document.getElementById("live");
  if (live) live.textContent = text;
}
