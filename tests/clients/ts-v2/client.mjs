#!/usr/bin/env node
// A one-prompt ACP v2 client on the TypeScript SDK's v2 API
// (`@agentclientprotocol/sdk/experimental/v2`): it spawns the agent command given after
// `--`, initializes with protocol version 2, opens a session on `--cwd`, sends one prompt,
// allows every permission question, waits for the turn to end the v2 way, closes the session
// and prints one JSON summary line on stdout.
//
//   node client.mjs --cwd DIR [--prompt TEXT] [--timeout SECONDS] [--trace FILE] -- AGENT ARGS...
//
// In v2 the `session/prompt` answer only says the prompt was inserted (it carries the user
// message's `messageId`); completion is a `state_update` back to `idle`, with a stop reason,
// after the session reported foreground work (`running` or `requires_action`). So the turn
// is over when both have arrived. The summary:
//
//   {"ok":true,"updates":["state_update",...],"toolCalls":1,"permissionRequests":1,
//    "stopReason":"end_turn","messageId":"...","schemaErrors":[],"violations":[],...}
//
// `updates` is the `sessionUpdate` kind of every `session/update` the SDK accepted, in order.
// `schemaErrors` is every place the SDK rejected what the agent sent: what it logged with
// console.error (a `session/update` or other notification that fails its schema, a response to
// no request, a message that is not JSON-RPC), every error response the SDK itself sent back
// (a line that is not JSON, a request whose params fail the schema, an unknown method), and a
// response whose result fails the schema; `rejectedUpdates` names the failing fields of each
// `session/update` the SDK refused. `violations` is what the v2 schema's descriptions
// require and the SDK does not check: the agent advertises `capabilities.session`, echoes the
// prompt as a user message with the answer's `messageId` before the turn ends, sends only
// v2's `session/update` kinds (or `_` extensions; the SDK takes any other as a future kind),
// and offers an allow option in each permission question (one without is answered
// `cancelled`). An idle before any `running` or `requires_action` ends nothing, as in the
// Rust SDK's one-shot client, so an agent that never reports work times out.
//
// Exit status: 0 all of it held; 1 a schema error; 2 timeout (default 60 s); 3 the agent
// exited before the turn was over, or with a nonzero status once its stdin was closed; 4 an
// error answer to one of the client's requests, or a violation. The summary is printed in
// every case, with `ok: false` and `error` when it failed.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { Readable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const CLIENT_INFO = { name: "heron-ts-v2-client", version: "0.1.0" };

function usage(message) {
  process.stderr.write(
    `${message}\nusage: node client.mjs --cwd DIR [--prompt TEXT] [--timeout SECONDS] [--trace FILE] -- AGENT ARGS...\n`,
  );
  process.exit(64);
}

function parseArgs(argv) {
  const options = { cwd: undefined, prompt: "Hello from the ACP v2 client.", timeout: 60, trace: undefined };
  let index = 0;
  for (; index < argv.length; index += 1) {
    const arg = argv[index];
    if (arg === "--") {
      index += 1;
      break;
    }
    const value = argv[index + 1];
    if (value === undefined) usage(`${arg} needs a value`);
    if (arg === "--cwd") options.cwd = value;
    else if (arg === "--prompt") options.prompt = value;
    else if (arg === "--timeout") options.timeout = Number(value);
    else if (arg === "--trace") options.trace = value;
    else usage(`unknown option ${arg}`);
    index += 1;
  }
  options.agent = argv.slice(index);
  if (!options.cwd) usage("--cwd is required");
  if (options.agent.length === 0) usage("the agent command goes after --");
  if (!(options.timeout > 0)) usage("--timeout must be a positive number of seconds");
  options.cwd = isAbsolute(options.cwd) ? options.cwd : resolve(options.cwd);
  return options;
}

const options = parseArgs(process.argv.slice(2));

const summary = {
  ok: false,
  updates: [],
  toolCalls: 0,
  permissionRequests: 0,
  stopReason: null,
  messageId: null,
  schemaErrors: [],
  violations: [],
  rejectedUpdates: [],
  agentExit: null,
};
const toolCallIds = new Set();
const userMessageIds = new Set();
let finished = false;

// --- Everything the SDK reports on the console is a rejection of the agent's traffic. ------
for (const level of ["error", "warn"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    summary.schemaErrors.push({ source: `console.${level}`, message: args.map(describe).join(" ") });
    original(...args);
  };
}

function describe(value) {
  if (typeof value === "string") return value;
  if (value?.name === "ZodError" && Array.isArray(value.issues)) return `ZodError: ${JSON.stringify(value.issues)}`;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

function isSchemaError(error) {
  // A result that fails its zod schema rejects the request with the ZodError itself.
  return error?.name === "ZodError";
}

// --- The agent process and the wire, tapped line by line. ------------------------------
const trace = options.trace ? createWriteStream(options.trace) : undefined;
const agent = spawn(options.agent[0], options.agent.slice(1), {
  cwd: options.cwd,
  stdio: ["pipe", "pipe", "inherit"],
});
let agentClosed = false;
let agentStdoutEnded = false;
let closingStdin = false;
agent.on("error", (error) => finish(3, `the agent could not be started: ${error.message}`));
agent.stdin.on("error", () => {}); // EPIPE once the agent is gone; its exit is reported instead.
agent.stdout.on("end", () => {
  agentStdoutEnded = true;
});
agent.on("close", (code, signal) => {
  agentClosed = true;
  summary.agentExit = { code, signal };
  if (finished) return;
  // Let the SDK take in what the agent wrote before it went.
  setTimeout(() => {
    if (closingStdin) return;
    finish(3, `the agent exited before the turn was over (code ${code}, signal ${signal})`);
  }, 200);
});

function lineTap(direction, onLine) {
  let buffered = "";
  const decoder = new TextDecoder();
  return (chunk) => {
    buffered += decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (!line) continue;
      trace?.write(`${direction} ${line}\n`);
      onLine?.(line);
    }
  };
}

// Every error response the client sends is the SDK refusing something the agent sent.
const tapOut = lineTap(">", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (message && typeof message === "object" && "error" in message && !("method" in message)) {
    summary.schemaErrors.push({ source: "client-error-response", id: message.id ?? null, error: message.error });
  }
});
// The SDK logs a rejected notification without saying what was wrong with it, so run the
// SDK's own generated schema over each `session/update` again to name the failing fields.
// Diagnostics only: the count is what the SDK reported.
const VARIANT_SCHEMAS = {
  user_message_chunk: "zContentChunk",
  user_message: "zUserMessage",
  agent_message_chunk: "zContentChunk",
  agent_message: "zAgentMessage",
  agent_thought_chunk: "zContentChunk",
  agent_thought: "zAgentThought",
  state_update: "zStateUpdate",
  tool_call_content_chunk: "zToolCallContentChunk",
  tool_call_update: "zToolCallUpdate",
  terminal_update: "zTerminalUpdate",
  terminal_output_chunk: "zTerminalOutputChunk",
  plan_update: "zPlanUpdate",
  available_commands_update: "zAvailableCommandsUpdate",
  config_option_update: "zConfigOptionUpdate",
  session_info_update: "zSessionInfoUpdate",
  usage_update: "zUsageUpdate",
  notice: "zNotice",
  compaction_update: "zCompactionUpdate",
  compaction_summary_chunk: "zCompactionSummaryChunk",
};
const validators = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v2/schema/zod.gen.js", import.meta.url)
).catch(() => undefined);
const tapIn = lineTap("<", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (message?.method !== "session/update" || !validators) return;
  const parsed = validators.zUpdateSessionNotification.safeParse(message.params);
  if (parsed.success) return;
  // For a known kind the union only says the tag is taken; its own schema says which field.
  const update = message.params?.update;
  const variant = validators[VARIANT_SCHEMAS[update?.sessionUpdate]];
  const issues = variant?.safeParse(update).error?.issues ?? parsed.error.issues;
  summary.rejectedUpdates.push({ line, issues });
});

const output = new WritableStream({
  write(chunk) {
    tapOut(chunk);
    return new Promise((resolveWrite) => {
      if (agent.stdin.destroyed) return resolveWrite();
      agent.stdin.write(chunk, () => resolveWrite());
    });
  },
});
const input = Readable.toWeb(agent.stdout).pipeThrough(
  new TransformStream({
    transform(chunk, controller) {
      tapIn(chunk);
      controller.enqueue(chunk);
    },
  }),
);

// --- The client. ---------------------------------------------------------------------------
function allowOption(options) {
  for (const kind of ["allow_once", "allow_always"]) {
    const option = options.find((candidate) => candidate.kind === kind);
    if (option) return option;
  }
  return undefined;
}

const app = acp
  .client({ name: CLIENT_INFO.name })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    summary.permissionRequests += 1;
    // A tool-call subject is applied like a tool_call_update, and may be its first sight.
    if (params.subject?.type === "tool_call") {
      toolCallIds.add(params.subject.toolCall.toolCallId);
      summary.toolCalls = toolCallIds.size;
    }
    const option = allowOption(params.options);
    if (!option) {
      summary.violations.push(`permission request "${params.title}" offers no allow option; answered cancelled`);
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const { update } = params;
    summary.updates.push(update.sessionUpdate);
    // The SDK takes any other kind as a custom or future one; from an agent that speaks v2
    // now, one without the `_` of an extension is a kind v2 does not have (v1's `tool_call`,
    // `plan`, `current_mode_update`...).
    if (!(update.sessionUpdate in VARIANT_SCHEMAS) && !update.sessionUpdate.startsWith("_")) {
      summary.violations.push(`session/update kind ${JSON.stringify(update.sessionUpdate)} is not one of ACP v2's`);
    }
    if (update.sessionUpdate === "tool_call_update") toolCallIds.add(update.toolCallId);
    if (update.sessionUpdate === "user_message" || update.sessionUpdate === "user_message_chunk") {
      userMessageIds.add(update.messageId);
    }
    summary.toolCalls = toolCallIds.size;
  });

// Resolves with the idle update that ends the foreground work the session reported.
async function untilIdleAfterWork(session) {
  let sawWork = false;
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") {
      if (sawWork) return message;
      continue; // An idle snapshot before any work (after session/new, say) ends nothing.
    }
    if (message.update.sessionUpdate === "state_update") sawWork = true;
  }
}

async function run(ctx) {
  const initialized = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    info: CLIENT_INFO,
    // All a v2 client can advertise is auth methods and elicitation; this one has neither.
    capabilities: {},
  });
  if (initialized.capabilities?.session == null) {
    summary.violations.push("the initialize answer has no capabilities.session, so session/* is not offered");
    throw new Error("the agent does not advertise capabilities.session");
  }

  const session = await ctx.buildSession(options.cwd).start();
  try {
    const idle = untilIdleAfterWork(session);
    idle.catch(() => {});
    const accepted = await session.prompt(options.prompt);
    summary.messageId = accepted.messageId;
    const stop = await idle;
    summary.stopReason = stop.stopReason ?? null;
    if (!userMessageIds.has(accepted.messageId)) {
      summary.violations.push(
        `no user_message or user_message_chunk with the prompt answer's messageId ${JSON.stringify(accepted.messageId)} arrived before idle`,
      );
    }
  } finally {
    session.dispose();
  }
  await ctx.request(acp.methods.agent.session.close, { sessionId: session.sessionId });
}

const timer = setTimeout(() => finish(2, `timed out after ${options.timeout} s`), options.timeout * 1000);

process.on("unhandledRejection", (error) => {
  summary.schemaErrors.push({ source: "unhandledRejection", message: describe(error) });
});
process.on("uncaughtException", (error) => {
  summary.schemaErrors.push({ source: "uncaughtException", message: describe(error) });
  finish(1, describe(error));
});

app
  .connectWith(acp.ndJsonStream(output, input), run)
  .then(() => closeAgent())
  .catch((error) => {
    if (isSchemaError(error)) {
      summary.schemaErrors.push({ source: "response", message: describe(error) });
      return finish(1, describe(error));
    }
    // The connection ends when the agent's stdout does; its exit status follows shortly.
    if (agentStdoutEnded || agentClosed) {
      const early = () =>
        finish(3, `the agent closed its stdout before the turn was over (${describe(error)}; exit ${JSON.stringify(summary.agentExit)})`);
      return agentClosed ? early() : setTimeout(early, 500);
    }
    finish(4, describe(error));
  });

// Close the agent's stdin as the stdio transport ends a connection, and give it 5 s to exit.
function closeAgent() {
  closingStdin = true;
  agent.stdin.end();
  const done = () => {
    const { code, signal } = summary.agentExit;
    if (code !== 0) return finish(3, `the agent exited with code ${code}, signal ${signal} once its stdin was closed`);
    if (summary.schemaErrors.length > 0) return finish(1, "the SDK rejected some of the agent's messages");
    if (summary.violations.length > 0) return finish(4, summary.violations[0]);
    finish(0);
  };
  if (agentClosed) return done();
  const kill = setTimeout(() => agent.kill("SIGKILL"), 5000);
  agent.once("close", () => {
    clearTimeout(kill);
    done();
  });
}

function finish(status, error) {
  if (finished) return;
  finished = true;
  clearTimeout(timer);
  if (status !== 0 && summary.schemaErrors.length > 0 && status !== 2 && status !== 3) status = 1;
  summary.ok = status === 0;
  if (error) summary.error = error;
  if (!agentClosed) agent.kill("SIGKILL");
  const exit = () => process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(status));
  if (trace) trace.end(exit);
  else exit();
}
