#!/usr/bin/env node
// An ACP agent written the way the TypeScript SDK's example agent is: it answers
// initialize, opens sessions, echoes each prompt's text back as one message chunk, and ends
// a turn it is told to cancel. It does only what an SDK user writes by hand, so what the
// acp conformance profile reports about it is what the SDK and that style of agent do.
import { randomUUID } from "node:crypto";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

// Session id to the turn in flight (its AbortController), or null between turns.
const sessions = new Map();

function echoOf(prompt) {
  return prompt
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("\n");
}

acp
  .agent({ name: "ts-echo" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "ts-echo", version: "0.1.0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = randomUUID();
    sessions.set(sessionId, null);
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    // As in the SDK's example: an unknown session is a thrown Error.
    if (!sessions.has(params.sessionId)) {
      throw new Error(`Session ${params.sessionId} not found`);
    }
    sessions.get(params.sessionId)?.abort();
    const turn = new AbortController();
    sessions.set(params.sessionId, turn);
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: {
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: echoOf(params.prompt) },
      },
    });
    sessions.set(params.sessionId, null);
    return { stopReason: turn.signal.aborted ? "cancelled" : "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.abort();
  })
  .connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
