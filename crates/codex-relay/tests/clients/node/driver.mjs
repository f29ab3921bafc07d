// A real MCP client (the official TypeScript SDK) that the Rust scenario tests drive: one JSON
// command per line on stdin, one JSON answer per line on stdout. It connects over stdio or
// streamable HTTP, calls tools, and answers elicitation forms by a policy the test sets.
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const client = new Client(
  { name: "codex-relay-node-driver", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
// Elicitation forms received, and how to answer them: accept with `content` when the message
// contains `acceptWhen`, otherwise decline.
const elicitations = [];
let policy = { acceptWhen: null, content: {} };
// Errors the SDK reports outside any call, e.g. a progress notification for a request that was
// already cancelled (which proves the server kept working on it).
const errors = [];
client.onerror = (e) => {
  errors.push(String(e && e.message ? e.message : e));
};
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const message = request.params.message;
  elicitations.push({ message, schema: request.params.requestedSchema });
  if (policy.acceptWhen !== null && message.includes(policy.acceptWhen)) {
    return { action: "accept", content: policy.content };
  }
  return { action: "decline" };
});

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function handle(cmd) {
  switch (cmd.op) {
    case "connect": {
      const transport =
        cmd.transport === "stdio"
          ? new StdioClientTransport({ command: cmd.command, args: cmd.args, env: cmd.env, stderr: "inherit" })
          : new StreamableHTTPClientTransport(new URL(cmd.url), { requestInit: { headers: cmd.headers ?? {} } });
      await client.connect(transport);
      const tools = await client.listTools();
      return {
        server: client.getServerVersion(),
        capabilities: client.getServerCapabilities(),
        tools: tools.tools.map((t) => t.name),
      };
    }
    case "policy":
      policy = { acceptWhen: cmd.acceptWhen, content: cmd.content };
      return {};
    case "elicitations":
      return { elicitations };
    case "errors":
      return { errors };
    case "call": {
      let progress = 0;
      const controller = new AbortController();
      if (cmd.abortAfterMs) setTimeout(() => controller.abort("test abort"), cmd.abortAfterMs);
      const started = Date.now();
      try {
        const result = await client.callTool({ name: cmd.tool, arguments: cmd.args }, undefined, {
          timeout: 120000,
          resetTimeoutOnProgress: true,
          signal: controller.signal,
          onprogress: () => {
            progress += 1;
          },
        });
        return {
          isError: result.isError === true,
          structured: result.structuredContent ?? null,
          text: text(result),
          progress,
          ms: Date.now() - started,
        };
      } catch (e) {
        return {
          thrown: String(e && e.message ? e.message : e),
          code: e && typeof e.code === "number" ? e.code : null,
          progress,
          ms: Date.now() - started,
        };
      }
    }
    case "close":
      await client.close();
      return {};
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = { ok: true, value: await handle(JSON.parse(line)) };
  } catch (e) {
    answer = { ok: false, error: String(e && e.stack ? e.stack : e) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
process.exit(0);
