// Package sessions is the leader's session manager: it launches a session's
// executor through its runtime plugin, waits for agentctl, probes it, starts
// or resumes the agent, relays prompts, mirrors agentctl's events into
// replicated state (messages, RUNNING/WAITING_FOR_INPUT, errors), and stops,
// resumes and deletes sessions. Live executions are cached in memory, keyed
// by session, and exist only on the leader.
//
// It talks to runtimes through the small Runtimes interface and to agentctl
// through shared/agentctl's client; it never imports the API.
package sessions
