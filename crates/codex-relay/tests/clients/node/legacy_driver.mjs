// A legacy `codex mcp-server` client on the official TypeScript MCP SDK, driven by the
// differential tests (tests/all/legacy_mcp.rs): one JSON command per line on stdin, one JSON answer
// per line on stdout. It reads `codex/event` notifications and answers `elicitation/create`
// approvals with `{decision}` the way the mobile client of reference 000 does.
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

let client = null;
let transport = null;
// Everything seen during the current call.
let events = [];
let elicitations = [];
// Decisions for the next elicitations, in order; an empty queue answers "denied".
let decisions = [];
// Called on every event and elicitation (to cancel or disconnect at the right moment).
let watcher = () => {};

// The SDK's own ElicitRequestSchema strips unknown params, which would hide the codex_*
// fields; a passthrough schema for the same method keeps them (the SDK still validates the
// request and the result).
const LegacyElicitRequest = z
  .object({ method: z.literal("elicitation/create"), params: z.looseObject({}) })
  .loose();

function pending() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

async function connect(cmd) {
  const capabilities = cmd.elicitation ? { elicitation: {} } : {};
  client = new Client({ name: "legacy-driver", version: "1.0.0" }, { capabilities });
  client.fallbackNotificationHandler = async (n) => {
    if (n.method !== "codex/event") return;
    const p = n.params || {};
    events.push({ requestId: p._meta?.requestId ?? null, threadId: p._meta?.threadId ?? null, id: p.id, msg: p.msg });
    watcher({ kind: "event", type: p.msg?.type });
  };
  if (cmd.elicitation) {
    client.setRequestHandler(LegacyElicitRequest, async (request) => {
      elicitations.push(request.params);
      const next = decisions.shift() ?? "denied";
      watcher({ kind: "elicitation" });
      if (next === "hold") {
        // Never answered (the client goes away meanwhile).
        return new Promise(() => {});
      }
      // The pinned SDK validates elicitation results, so `action` must be present; legacy
      // servers read only `decision`.
      return { action: "accept", content: {}, decision: next };
    });
  }
  transport = cmd.url
    ? new StreamableHTTPClientTransport(new URL(cmd.url), { requestInit: { headers: cmd.headers ?? {} } })
    : new StdioClientTransport({ command: cmd.command, args: cmd.args, env: cmd.env, stderr: "inherit" });
  await client.connect(transport);
  const tools = await client.listTools();
  return { server: client.getServerVersion(), tools: tools.tools };
}

async function call(cmd) {
  events = [];
  elicitations = [];
  decisions = [...(cmd.decisions || [])];
  const controller = new AbortController();
  const ended = pending();
  let closed = false;
  watcher = (what) => {
    if (cmd.cancelOn && what.kind === "event" && what.type === cmd.cancelOn) controller.abort("cancelled by the test");
    if (cmd.closeOnElicitation && what.kind === "elicitation" && !closed) {
      closed = true;
      setTimeout(() => client.close().then(() => ended.resolve("closed")), 200);
    }
    if (what.kind === "event" && (what.type === "turn_aborted" || what.type === "task_complete")) ended.resolve(what.type);
  };
  const started = Date.now();
  let answer;
  try {
    const result = await client.callTool({ name: cmd.tool, arguments: cmd.args }, undefined, {
      timeout: cmd.timeoutMs ?? 120000,
      signal: controller.signal,
    });
    answer = { result };
  } catch (e) {
    answer = { thrown: String(e && e.message ? e.message : e) };
  }
  // A cancelled (or never answered) call: wait for the turn's last event.
  if (answer.thrown && !closed) {
    await Promise.race([ended.promise, new Promise((r) => setTimeout(r, cmd.settleMs ?? 10000))]);
  }
  if (closed) await ended.promise;
  watcher = () => {};
  return { ...answer, ms: Date.now() - started, events, elicitations };
}

// Reference 000's flow: start with its config shape, track the ids from session_configured
// and the response, continue with {sessionId, conversationId, prompt}.
async function reference000(cmd) {
  let sessionId = null;
  let conversationId = null;
  const track = (response) => {
    for (const e of events) {
      const m = e.msg || {};
      sessionId = m.session_id ?? m.sessionId ?? sessionId;
      conversationId = m.conversation_id ?? m.conversationId ?? conversationId;
    }
    const meta = response?.meta || {};
    sessionId = meta.sessionId ?? response?.sessionId ?? sessionId;
    conversationId = meta.conversationId ?? response?.conversationId ?? conversationId;
  };
  const first = await call({ tool: "codex", args: cmd.start, decisions: cmd.decisions });
  track(first.result);
  const firstSeen = { sessionId, elicitations: first.elicitations, events: first.events.map((e) => e.msg.type), result: first.result };
  if (!conversationId) conversationId = sessionId;
  const second = await call({ tool: "codex-reply", args: { sessionId, conversationId, prompt: cmd.next }, decisions: [] });
  return { first: firstSeen, second: { events: second.events.map((e) => e.msg.type), result: second.result, thrown: second.thrown } };
}

async function handle(cmd) {
  switch (cmd.op) {
    case "connect":
      return connect(cmd);
    case "call":
      return call(cmd);
    case "reference000":
      return reference000(cmd);
    case "close":
      if (client) await client.close();
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
