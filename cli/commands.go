package cli

import (
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/client"
)

// commandTable is every leaf subcommand, in the order help lists them.
func commandTable() []command {
	return []command{
		{path: "status", summary: "show the cluster's leader, term, indexes and nodes", bind: noFlags(runStatus)},
		{path: "operator raft list-peers", summary: "list the raft peers", bind: noFlags(runListPeers)},
		{path: "operator raft add-peer", args: "ADDRESS", summary: "add the server answering at ADDRESS (its HTTP host:port) as a voter", bind: noFlags(runAddPeer)},
		{path: "operator raft remove-peer", args: "ID", summary: "remove a raft peer", bind: noFlags(runRemovePeer)},
		{path: "operator raft transfer-leadership", args: "[-id ID]", summary: "hand leadership to another voter", bind: withFlags(transferFlags, runTransferLeadership)},
		{path: "operator snapshot save", args: "FILE", summary: "save the cluster state to FILE", bind: noFlags(runSnapshotSave)},
		{path: "operator snapshot restore", args: "FILE", summary: "restore the cluster state from FILE", bind: noFlags(runSnapshotRestore)},
		{path: "task create", args: "-title T [-workspace PATH] [-branch B] [-q]", summary: "create a task", bind: withFlags(taskCreateFlags, runTaskCreate)},
		{path: "task list", args: "[-q] [-verbose]", summary: "list tasks", bind: withFlags(taskListFlags, runTaskList)},
		{path: "task close", args: "ID", summary: "mark a task DONE (its sessions are left as they are)", bind: noFlags(runTaskClose), id: idTask},
		{path: "task reopen", args: "ID", summary: "reopen a DONE task", bind: noFlags(runTaskReopen), id: idTask},
		{path: "task delete", args: "ID [-force]", summary: "stop and delete a task's sessions, then the task", bind: withFlags(forceFlags, runTaskDelete), id: idTask},
		{path: "session create", args: "-task ID -agent NAME -runtime NAME [-option K=V]… [-detach] [-timeout D] [-q]", summary: "create a session and wait until its agent takes prompts", bind: withFlags(sessionCreateFlags, runSessionCreate)},
		{path: "session list", args: "[-task ID] [-state S] [-q] [-verbose]", summary: "list sessions", bind: withFlags(sessionListFlags, runSessionList)},
		{path: "session status", args: "ID", summary: "show a session's status", bind: noFlags(runSessionStatus), id: idSession},
		{path: "session prompt", args: "ID [-file F] [-detach] [-timeout D] [--] TEXT…|-", summary: "send a prompt and print the agent's reply as it streams", bind: withFlags(promptFlags, runSessionPrompt), id: idSession},
		{path: "session messages", args: "ID [-f]", summary: "print the session's conversation: replies, thoughts, tool calls and plans (-f follows it)", bind: withFlags(followFlags, runSessionMessages), id: idSession},
		{path: "session resume", args: "ID [-detach] [-timeout D]", summary: "resume a stopped or failed session and wait until its agent takes prompts", bind: withFlags(waitFlags, runSessionResume), id: idSession},
		{path: "session stop", args: "ID [-detach] [-timeout D]", summary: "stop a session and wait until it is STOPPED", bind: withFlags(waitFlags, runSessionStop), id: idSession},
		{path: "session delete", args: "ID [-force] [-detach] [-timeout D]", summary: "end a session for good", bind: withFlags(deleteFlags, runSessionDelete), id: idSession},
		{path: "session rename", args: "ID NAME", summary: "name a session (the picker and the web page show the name)", bind: noFlags(runSessionRename), id: idSession},
		{path: "session pin", args: "ID [-unpin]", summary: "pin a session: paddock resume lists pinned sessions first", bind: withFlags(unpinFlags, runSessionPin), id: idSession},
		{path: "session cancel", args: "ID", summary: "cancel the running turn (the session stays)", bind: noFlags(runSessionCancel), id: idSession},
		{path: "session permissions", args: "ID", summary: "list the permission requests of a session's agent, pending and ended", bind: noFlags(runSessionPermissions), id: idSession},
		{path: "session approve", args: "ID [PERMISSION_ID] [-option KIND]", summary: "answer the oldest pending permission request (or PERMISSION_ID; while a turn runs, waits up to 30s for one) with the agent's allow_once option (or the -option kind)", bind: withFlags(approveFlags, runSessionApprove), id: idSession},
		{path: "session deny", args: "ID [PERMISSION_ID]", summary: "answer the oldest pending permission request (or PERMISSION_ID; while a turn runs, waits up to 30s for one) with the agent's reject_once option (else reject_always)", bind: noFlags(runSessionDeny), id: idSession},
		{path: "session files", args: "ID [PATH]", summary: "list a directory of the session's workspace", bind: noFlags(runSessionFiles), id: idSession},
		{path: "session cat", args: "ID PATH", summary: "print a file of the session's workspace", bind: noFlags(runSessionCat), id: idSession},
		{path: "session diff", args: "ID", summary: "print the workspace's git diff", bind: noFlags(runSessionDiff), id: idSession},
		{path: "plugin list", summary: "list runtime plugins", bind: noFlags(runPluginList)},
		pluginSchemaCommand,
		{path: "executor list", args: "[-session ID]", summary: "list executors", bind: withFlags(executorListFlags, runExecutorList)},
		{path: "agent list", summary: "list agent profiles", bind: noFlags(runAgentList)},
		attachCommand,
		chatCommand,
		resumeCommand,
		{path: "events", args: "[-task ID] [-session ID]", summary: "stream the cluster's events (JSON lines with -json)", bind: withFlags(eventsFlags, runEvents)},
		monitorCommand,
		{path: "version", summary: "print the version, commit and Go version (also -version)", bind: noFlags(runVersion)},
		{path: "completion", args: "bash|zsh|fish", summary: "print a shell completion script", bind: noFlags(runCompletion)},
		tlsCACreateCommand,
		tlsCertCreateCommand,
	}
}

// exactArgs checks the number of positional arguments, naming what is missing.
func exactArgs(pos []string, names ...string) error {
	if len(pos) < len(names) {
		return &usageError{msg: "missing " + strings.Join(names[len(pos):], " and ")}
	}
	if len(pos) > len(names) {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", pos[len(names)])}
	}
	for i, p := range pos {
		if strings.TrimSpace(p) == "" {
			return &usageError{msg: "empty " + names[i]}
		}
	}
	return nil
}

// call runs fn with a client, capturing the raw body when -json is set. When
// -json is set the raw body is printed and human is skipped.
func (e *env) call(fn func(c *client.Client, opts []client.CallOption) error, human func() error) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw []byte
	var opts []client.CallOption
	if e.g.json {
		opts = append(opts, client.CaptureBody(&raw))
	}
	if err := fn(c, opts); err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	return human()
}

// show is the call-then-print pattern of most commands: get makes the API
// call (passing opts on), then the server's JSON is printed as it came with
// -json, else human renders the decoded answer.
func show[T any](e *env, get func(c *client.Client, opts []client.CallOption) (T, error), human func(T) error) error {
	var v T
	return e.call(func(c *client.Client, opts []client.CallOption) (err error) {
		v, err = get(c, opts)
		return err
	}, func() error { return human(v) })
}
