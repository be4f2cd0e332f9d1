// What the server tells the console (GET /console/config.json): read once.

/** @type {Promise<{trace_url_template: string}> | undefined} */
let loaded;

/** The console's configuration; an unreadable one is empty. */
export function config() {
  loaded ??= fetch("config.json").then((r) => (r.ok ? r.json() : {}), () => ({})).then((c) => ({ trace_url_template: "", ...c }));
  return loaded;
}

/**
 * The link to a trace, when the server has a trace URL template and the
 * request has a trace id; else null.
 * @param {string} template
 * @param {string | undefined} traceId
 */
export function traceURL(template, traceId) {
  if (!template || !traceId || !/^[0-9a-f]{32}$/.test(traceId)) return null;
  return template.replaceAll("{trace_id}", traceId);
}
