export * from "./client.js";
export type { StreamEvent, StreamOptions, UnknownEvent, WatchEvent } from "./sse.js";
export type { components, paths } from "./schema.js";
export { partials, type PartialEvent, type PartialValue } from "./partials.js";
