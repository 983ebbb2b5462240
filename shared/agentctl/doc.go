// Package agentctl is Paddock's executor-side daemon and its Go clients.
//
// `agentctl serve` (Server) owns the agent process of one session, gives
// workspace access whether or not an agent runs, and keeps the session's
// highest fencing token durably. `agentctl host` (Host) starts, lists and
// stops per-session serve instances on a remote machine. Client and
// HostClient mirror the two HTTP APIs, with a timeout on every call.
//
// # Serve API
//
// Every request carries `Authorization: Bearer SECRET` (else 401). Mutating
// requests (marked F) carry `X-Paddock-Fencing-Token: N`; agentctl persists the
// highest N seen (fsync'd, STATE_DIR/fencing.json) and answers a lower one with
// 409 {"error":{"code":"conflict","message":"fencing token 3 is lower than 5 already seen"}};
// a missing or malformed header is 400. Errors are {"error":{"code","message"}}.
//
//	GET  /v1/health                  {"status":"ok","session_id","nonce","pid","workspace","agent_status","fencing_token","started_at","agent"}
//	GET  /v1/capabilities            {"supports_session_resume":bool|null,"supports_workspace_only":true}
//	POST /v1/probe {"profile"}       same; ACP: runs initialize (loadSession); pty: the profile's declaration
//	GET  /v1/agent                   AgentState {"status":none|starting|waiting_for_input|running|exited|error, "resume_token", "exit_code", ...}
//	POST /v1/agent/start (F)         {"profile":{protocol,command,new_args,resume_args,permission:ask|allow|deny,auto_allow,permission_timeout(ns),supports_session_resume,env},"resume_token"?} → 200 AgentState
//	POST /v1/agent/prompt (F)        {"text"} → 202 {"message_id","turn"}; 409 while a turn runs
//	POST /v1/agent/cancel (F)        → 202; the turn ends with outcome "cancelled"
//	POST /v1/agent/stop (F)          → 200 {"exit_code"} after the agent exited
//	GET  /v1/messages                {"messages":[{"id","role":"user|agent|system|thought|tool|plan","text","tool_call"?,"plan"?,"complete","created_at","updated_at"}]}
//	GET  /v1/events?since=N&wait=25s long poll → {"nonce","events":[{"seq","type","time","data"}],"next"}
//	     (&compact=true leaves out message updates a later one in the answer supersedes;
//	     &gather=100ms holds an answer of chunks of unfinished messages until 100 ms after the
//	     first, answering at once on any other event; the answer's "gather" echoes it;
//	     &permissions=true adds "permissions", GET /v1/agent/permissions' answer listed after
//	     the events: a supervisor's catch-up in one round trip)
//	GET  /v1/events/stream?since=N&gather=100ms  the same answers, compacted and gathered, one JSON
//	     object per line for as long as the request lasts (an empty one every 15 s when quiet); a
//	     message_updated that grows text the stream carried has "delta":{"id","from","text","complete",
//	     "updated_at"} in place of "data"
//	GET  /v1/files?path=             {"entries":[{"name","path","type","size","mode","mod_time"}]}
//	GET  /v1/files/content?path=     raw bytes of a regular file (a FIFO or device is 400)
//	PUT  /v1/files/content?path= (F) raw bytes → {"path","size"}, replaced atomically; STATE_DIR (.paddock) and .git are read-only (403)
//	GET  /v1/git/status              {"is_repo","branch","entries":[{"path","status"}]}
//	GET  /v1/git/diff?staged=        {"diff"}; 409 when not a git repository
//	POST /v1/fencing (F)             presents the token → {"fencing_token": highest}
//	GET  /v1/terminals/{name}        Options.Terminals (shared/term); 404 when not configured
//	GET  /v1/terminals               {"terminals":[{"name","command","owner":"agent|user","running","exit_code","read_only"}]}
//	GET  /v1/agent/permissions       api.Permissions: every request of the current agent run, oldest first
//	POST /v1/agent/permissions/{id} (F) {"option_id","answered_by"?} → 200 api.Permission; 400 option not offered,
//	     404 unknown, 409 not pending
//	POST /v1/agent/mode (F)          {"mode_id"} → 200 AgentState (session/set_mode); 400 unknown mode, 409 no agent
//	GET  /v1/controller/chat         {"controller":{"host","pid","nonce","since","expires"}|null}: the chat holding the conversation
//	PUT  /v1/controller/chat         {"client":{"host","pid","nonce"},"takeover"?} → 200 the registration (a renewal keeps "since"),
//	     lapsing after Options.ChatControllerTTL (15 s) unrenewed; 409 another nonce holds it and takeover is not set
//	DELETE /v1/controller/chat?nonce= → 204 (also when none is held); 409 another nonce holds it
//
// Event types: agent_started {pid,protocol,resume_token,resumed},
// agent_stopped {exit_code}, message_added / message_updated {message},
// turn_finished {turn,outcome:end_turn|cancelled|error,error?},
// permission_requested / permission_answered {permission} (answered, by a
// person or "policy", timed_out or cancelled; a request the policy answers
// has only permission_answered), commands_updated {commands},
// mode_updated {modes}, agent_error {message}. Seq restarts at 1 with every
// boot (a new nonce).
//
// An ACP agent's work is in the transcript: roles thought (streamed like
// agent), tool (Message.ToolCall; one entry per toolCallId that updates
// merge into) and plan (Message.Plan; one per turn, replaced by updates).
// agentctl advertises fs.readTextFile/writeTextFile (the workspace, confined
// as the file API) and terminal (commands run as the read-only terminals
// cmd-1, cmd-2, …; see agentterms.go).
//
// Paths are workspace-relative; "..", absolute paths and symlinks out are 400.
// Resume tokens must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$ (else 400);
// templates {{resume_token}}, {{session_id}}, {{workspace}} are substituted in
// argv elements only, argv[0] resolves on agentctl's PATH, nothing runs
// through a shell. Agents inherit agentctl's environment minus PADDOCK_AGENTCTL_*
// plus the profile's env. ACP initialize and session setup (and a pty agent's
// first prompt) are bounded by Options.InitTimeout (env
// PADDOCK_AGENTCTL_INIT_TIMEOUT for the binary); an agent that is missing,
// exits, writes non-JSON-RPC or stays silent fails the start with a clear
// message and an agent_error event, and agentctl keeps serving.
//
// Protocols: "acp" (acpagent: the ACP session id is the resume token; a resume
// is session/load, whose replayed history becomes complete messages) and "pty"
// (ptyagent: the program runs in a PTY, prompts are typed, Ctrl-C cancels,
// turns and replies follow the demo agent's convention documented in
// ptyagent; Server.AgentTerminal exposes the PTY as the terminal "agent").
//
// # Host API
//
//	GET    /v1/health                 {"status":"ok","pid","instances"}
//	POST   /v1/instances {"session_id","secret"?} → 201 {"session_id","url","secret","pid","nonce","workspace","healthy"}
//	GET    /v1/instances              {"instances":[...]} each re-verified (pid + nonce via health)
//	DELETE /v1/instances/{session_id} stops it (only if pid and nonce check out) and forgets it
//
// Instances run detached (Setsid) under ROOT/instances/ID with workspaces in
// ROOT/workspaces/ID; the registry ROOT/instances.json survives host restarts.
//
// This package must not import anything under supervisor/ (nor shared/term:
// terminals are plugged in through the Terminals interface).
package agentctl
