// A chat as useChat holds one, without React: the AI SDK's AbstractChat
// over a plain array of messages (shared by the node and browser tests).
import { AbstractChat, type ChatInit, type ChatState, type ChatStatus, type UIMessage } from "ai";

class State<M extends UIMessage> implements ChatState<M> {
  status: ChatStatus = "ready";
  error: Error | undefined = undefined;
  constructor(public messages: M[] = []) {}
  pushMessage = (m: M) => void (this.messages = [...this.messages, m]);
  popMessage = () => void (this.messages = this.messages.slice(0, -1));
  replaceMessage = (i: number, m: M) => void (this.messages = this.messages.map((x, j) => (j === i ? m : x)));
  snapshot = <T>(x: T): T => structuredClone(x);
}

export class Chat<M extends UIMessage = UIMessage> extends AbstractChat<M> {
  constructor(init: ChatInit<M>) {
    super({ ...init, state: new State<M>(init.messages ?? []) });
  }
}

/** A promise of the chat's next finished response that is not a tool-calls pause. */
export function finished<M extends UIMessage>(): { onFinish: NonNullable<ChatInit<M>["onFinish"]>; done: Promise<void> } {
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  return { onFinish: (e) => void (e.finishReason !== "tool-calls" && resolve()), done };
}
