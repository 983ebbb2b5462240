#!/usr/bin/env node
// paddock-ts-agent: an ACP agent built on the official TypeScript SDK
// (@agentclientprotocol/sdk), speaking ACP on stdio. Paddock's tests run it
// to check that the supervisor handles an agent it did not write, whose
// messages come from the SDK real agents use.
//
// Every prompt is one turn N (counted per session from 1) that sends, as a
// coding agent does:
//   1. a plan of three steps, then an update of it as each step is done;
//   2. an agent thought;
//   3. tool call ts-N-edit (kind edit) proposing ts-agent.txt in the session's
//      cwd, its tool_call_update carrying the diff and status completed;
//   4. tool call ts-N-run (kind execute) and a session/request_permission for
//      it, offering allow_always, allow_once and reject_once;
//   5. on an allow option: ts-agent.txt written through fs/write_text_file
//      (when the client offers it), the run completed, and the reply
//      "ts-agent: allowed OPTIONID"; on reject: the run failed and
//      "ts-agent: rejected OPTIONID"; when the request is cancelled (the
//      client's answer after session/cancel): "ts-agent: cancelled" and stop
//      reason cancelled.
// The reply's status is its last line.
import { randomUUID } from "node:crypto";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

/** The file the agent proposes and, when allowed, writes. */
const FILE = "ts-agent.txt";

/** Client capabilities from initialize. */
let clientCaps = {};

/** Open sessions by id: { cwd, turns, abort (the running prompt's) }. */
const sessions = new Map();

const app = acp
  .agent({ name: "paddock-ts-agent" })
  .onRequest(acp.methods.agent.initialize, ({ params }) => {
    clientCaps = params.clientCapabilities ?? {};
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false },
      agentInfo: { name: "paddock-ts-agent", version: "1.0.0" },
      authMethods: [],
    };
  })
  .onRequest(acp.methods.agent.authenticate, () => ({}))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `ts-${randomUUID()}`;
    sessions.set(sessionId, { cwd: params.cwd, turns: 0, abort: null });
    return { sessionId };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.abort?.abort();
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw acp.RequestError.invalidParams({ error: `unknown session ${params.sessionId}` });
    }
    session.abort?.abort();
    const abort = new AbortController();
    session.abort = abort;
    try {
      return await turn(client, params.sessionId, session, abort.signal);
    } finally {
      if (session.abort === abort) session.abort = null;
    }
  });

/** Runs one turn and returns the prompt's response. */
async function turn(client, sessionId, session, cancelled) {
  const n = ++session.turns;
  const update = (u) => client.notify(acp.methods.client.session.update, { sessionId, update: u });
  const say = (text) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });
  const plan = (...statuses) =>
    update({
      sessionUpdate: "plan",
      entries: [
        { content: `Propose ${FILE}`, priority: "high", status: statuses[0] },
        { content: "Ask permission to write it", priority: "high", status: statuses[1] },
        { content: `Write ${FILE}`, priority: "medium", status: statuses[2] },
      ],
    });

  await plan("in_progress", "pending", "pending");
  await update({
    sessionUpdate: "agent_thought_chunk",
    content: { type: "text", text: `I will propose ${FILE}, then ask before writing it.` },
  });

  const file = path.join(session.cwd, FILE);
  const newText = `written by paddock-ts-agent (turn ${n})\n`;
  const editId = `ts-${n}-edit`;
  await update({
    sessionUpdate: "tool_call",
    toolCallId: editId,
    title: `Edit ${FILE}`,
    kind: "edit",
    status: "pending",
    locations: [{ path: file }],
    rawInput: { path: file, content: newText },
  });
  await update({
    sessionUpdate: "tool_call_update",
    toolCallId: editId,
    status: "completed",
    content: [{ type: "diff", path: file, oldText: null, newText }],
  });
  await plan("completed", "in_progress", "pending");

  const runId = `ts-${n}-run`;
  const runCall = {
    toolCallId: runId,
    title: `Run: write ${FILE}`,
    kind: "execute",
    status: "pending",
    rawInput: { command: "write", path: file },
  };
  await update({ sessionUpdate: "tool_call", ...runCall });
  // On session/cancel the SDK sends $/cancel_request for the request and
  // waits for the client's answer, the "cancelled" outcome.
  const answer = await client.request(
    acp.methods.client.session.requestPermission,
    {
      sessionId,
      toolCall: runCall,
      options: [
        { optionId: "allow_always", name: "Always allow", kind: "allow_always" },
        { optionId: "allow_once", name: "Allow", kind: "allow_once" },
        { optionId: "reject_once", name: "Reject", kind: "reject_once" },
      ],
    },
    { cancellationSignal: cancelled },
  );

  if (cancelled.aborted || answer.outcome.outcome === "cancelled") {
    await update({ sessionUpdate: "tool_call_update", toolCallId: runId, status: "failed" });
    await say("ts-agent: cancelled");
    return { stopReason: "cancelled" };
  }
  const option = answer.outcome.optionId;
  if (!option.startsWith("allow")) {
    await update({ sessionUpdate: "tool_call_update", toolCallId: runId, status: "failed" });
    await say(`ts-agent: rejected ${option}`);
    return { stopReason: "end_turn" };
  }
  let note = `the client offers no fs/write_text_file: ${FILE} not written`;
  let status = "failed";
  if (clientCaps.fs?.writeTextFile) {
    try {
      await client.request(acp.methods.client.fs.writeTextFile, { sessionId, path: file, content: newText });
      note = `wrote ${FILE}`;
      status = "completed";
    } catch (err) {
      note = `fs/write_text_file ${file}: ${err.message ?? err}`;
    }
  }
  await update({
    sessionUpdate: "tool_call_update",
    toolCallId: runId,
    status,
    content: [{ type: "content", content: { type: "text", text: note } }],
  });
  await plan("completed", "completed", "completed");
  await say(`${note}\n`);
  await say(`ts-agent: allowed ${option}`);
  return { stopReason: "end_turn" };
}

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);
