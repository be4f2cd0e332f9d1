export { createChatd, type ChatdProvider, type ChatdProviderSettings } from "./provider.js";
export { ChatdLanguageModel } from "./model.js";
export { ChatdTurnError } from "./errors.js";
export { schemaName, type ChatdCallOptions } from "./prompt.js";
