// The forms shared by views: a message with an optional JSON Schema.

import { h, field } from "./dom.js";

/**
 * Message and structured-output fields (ids prefixed with p): content, and
 * optionally a schema name and a pasted JSON Schema. body() returns
 * {content, response_format?} or null after marking a field the browser
 * can already refuse (empty text, schema that is not JSON); the server's
 * admission decides everything else and its field errors land here too.
 */
export function messageFields(p, { text = "", label = "Message" } = {}) {
  const content = field(p + "-content", label, h("textarea", { rows: 3, required: true, value: text }));
  const name = field(p + "-schema-name", "Schema name", h("input", { type: "text", value: "result", autocomplete: "off", spellcheck: "false" }),
    "Letters, digits, _ and -, at most 64.");
  const schema = field(p + "-schema", "JSON Schema", h("textarea", { rows: 6, spellcheck: "false", class: "code" }),
    "Leave empty for a plain text answer. The server validates it when you send.");
  const details = h("details", { class: "schema" }, h("summary", {}, "Structured output (JSON Schema)"), name.wrap, schema.wrap);
  const fields = {
    content, "response_format.json_schema.name": name, "response_format": schema,
    "response_format.json_schema.schema": schema,
  };
  const body = () => {
    Object.values(fields).forEach((f) => f.err(""));
    const text = content.control.value;
    if (!text.trim()) {
      content.err("Write a message.");
      content.control.focus();
      return null;
    }
    const out = { content: [{ type: "text", text }] };
    const raw = schema.control.value.trim();
    if (raw) {
      try {
        out.response_format = { type: "json_schema", json_schema: { name: name.control.value.trim(), schema: JSON.parse(raw) } };
      } catch (e) {
        details.open = true;
        schema.err("Not valid JSON: " + e.message);
        schema.control.focus();
        return null;
      }
    }
    return out;
  };
  return { wrap: [content.wrap, details], fields, body, details, schema };
}

/** A form's alert line (form-level errors, read out when they change). */
export const alertLine = () => h("p", { class: "form-error", role: "alert" });
