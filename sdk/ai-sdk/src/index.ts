export { createChatd, type ChatdProvider, type ChatdProviderSettings } from "./provider.js";
export { ChatdLanguageModel } from "./model.js";
export { ChatdTurnError } from "./errors.js";
export { schemaName, type ChatdCallOptions } from "./prompt.js";
export {
  ChatdChatTransport,
  createChatdTransport,
  type ChatStore,
  type ChatdMessageMetadata,
  type ChatdPartialData,
  type ChatdReceiptData,
  type ChatdTransportOptions,
  type TransportOutput,
  type TransportTool,
} from "./transport.js";
