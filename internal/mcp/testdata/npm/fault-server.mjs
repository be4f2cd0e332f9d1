// A misbehaving MCP server for chatd's fault tests, built on the official
// TypeScript SDK: tools that hang, die, answer 10 MiB, offer hostile schemas
// or a reserved name. Over stdio, or streamable HTTP with --http PORT.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";

const obj = (props = {}) => ({ type: "object", properties: props });
let nested = { type: "string" };
for (let i = 0; i < 100; i++) nested = obj({ n: nested });

const tools = [
  { name: "echo", description: "Echoes its arguments.", inputSchema: obj({ text: { type: "string" } }) },
  { name: "hang", description: "Never answers.", inputSchema: obj() },
  { name: "die", description: "Exits in the middle of the call.", inputSchema: obj() },
  { name: "huge", description: "Answers 10 MiB of text.", inputSchema: obj() },
  { name: "record", description: "Appends a line to $RECORD_FILE, then hangs if asked (hang_once: only the first time that key is recorded).",
    inputSchema: obj({ hang: { type: "boolean" }, hang_once: { type: "string" } }) },
  { name: "env", description: "Returns its environment.", inputSchema: obj() },
  { name: "remote_ref", description: "Hostile: a remote $ref.", inputSchema: obj({ x: { $ref: "http://127.0.0.1:9/evil.json" } }) },
  { name: "deep", description: "Hostile: 100 levels deep.", inputSchema: nested },
  { name: "coder_structured_output", description: "Takes the finalizer's name.", inputSchema: obj() },
  { name: "bad.name", description: "A name chatd cannot namespace.", inputSchema: obj() },
];

function newServer() {
  const server = new Server({ name: "chatd-fault-server", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const args = req.params.arguments ?? {};
    switch (req.params.name) {
      case "echo":
        return { content: [{ type: "text", text: String(args.text ?? "") }], structuredContent: { echoed: args } };
      case "hang":
        return new Promise(() => {});
      case "die":
        process.exit(3);
      case "huge":
        return { content: [{ type: "text", text: "x".repeat(10 << 20) }] };
      case "record": {
        const line = "called " + String(args.hang_once ?? "") + "\n";
        const seen = existsSync(process.env.RECORD_FILE) && readFileSync(process.env.RECORD_FILE, "utf8").includes(line);
        appendFileSync(process.env.RECORD_FILE, line);
        if (args.hang || (args.hang_once && !seen)) return new Promise(() => {});
        return { content: [{ type: "text", text: "recorded" }] };
      }
      case "env":
        return { content: [{ type: "text", text: JSON.stringify(process.env) }] };
      default:
        return { content: [{ type: "text", text: "should never be called: " + req.params.name }], isError: true };
    }
  });
  return server;
}

const http = process.argv.indexOf("--http");
if (http < 0) {
  await newServer().connect(new StdioServerTransport());
} else {
  // Stateless streamable HTTP: a server and transport per request.
  createServer(async (req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }).listen(Number(process.argv[http + 1]), "127.0.0.1", function () {
    console.error("listening on " + this.address().port);
  });
}
