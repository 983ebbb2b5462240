package state

import (
	"time"

	"github.com/paddockhq/paddock/api"
)

// NodeUnavailableMessage is the resume_message of ReasonNodeUnavailable.
func NodeUnavailableMessage(node string) string {
	return "The session's node " + node + " does not answer. The session resumes there when the node is back."
}

// WorkspaceMissingMessage is the resume_message of ReasonWorkspaceMissing.
func WorkspaceMissingMessage(path string) string {
	return "The session's workspace " + path + " is gone; start a new session."
}

// resumeMessages are the sentences a client shows for each reason.
var resumeMessages = map[string]string{
	api.ReasonNotResumable:       "This agent cannot resume previous sessions. Create a new session.",
	api.ReasonMissingResumeToken: "This session has no conversation to resume. Create a new session.",
	api.ReasonExecutorLost:       "The executor of this session was lost. Resume the session to start it again.",
	api.ReasonAgentNotRunning:    "The agent is not running. Resume the session to continue the conversation.",
}

// startingMessage is the sentence while a session starts (or resumes).
const startingMessage = "The agent is starting; it takes prompts once it is waiting for input."

// ResumeMessage returns the sentence for a resume reason.
func ResumeMessage(reason string) string { return resumeMessages[reason] }

// StatusInput is what a status is computed from. AgentRunning reports whether
// an agent execution is live; SupportsResume is the agent's resume capability
// (probed by agentctl, else declared by the profile; nil when unknown).
type StatusInput struct {
	Session        api.Session
	Executor       *api.Executor
	AgentRunning   bool
	SupportsResume *bool
	// NodeUnavailable names the executor's node when it does not answer.
	NodeUnavailable string
	// WorkspaceMissing is the session's workspace path when the runtime
	// that made it reports it gone (only asked while the agent does not
	// run): the session then cannot resume.
	WorkspaceMissing string
	// PendingPermissions counts the requests waiting for an answer
	// (Store.PendingPermissions).
	PendingPermissions int
	// Commands and Modes are what the running agent announced (relayed
	// from agentctl; nil when unknown).
	Commands []api.AgentCommand
	Modes    *api.AgentModes
}

// ComputeStatus builds the session status object: every field present, null
// when unknown, and only this session's facts (never a task-level fallback).
func ComputeStatus(in StatusInput) api.Status {
	s := in.Session
	st := api.Status{SessionID: s.ID, TaskID: s.TaskID, State: s.State, PendingPermissions: in.PendingPermissions,
		Commands: in.Commands, Modes: in.Modes}
	if st.Commands == nil {
		st.Commands = []api.AgentCommand{}
	}
	st.AgentProfileID = strPtr(s.Agent)
	if s.LastTurnOutcome != "" {
		outcome := s.LastTurnOutcome
		st.LastTurnOutcome = &outcome
	}
	st.Runtime = strPtr(s.Runtime)
	if e := in.Executor; e != nil {
		status := e.Status
		st.ExecutorStatus = &status
		st.WorktreePath = strPtr(e.WorktreePath)
		st.WorktreeBranch = strPtr(e.WorktreeBranch)
		st.Node = strPtr(e.Node)
		if in.AgentRunning {
			st.AgentExecutionID = strPtr(e.AgentExecutionID)
		}
	}
	supports := in.SupportsResume != nil && *in.SupportsResume
	st.IsAgentRunning = in.AgentRunning
	st.IsResumable = supports && s.HasResumeToken && in.WorkspaceMissing == ""
	st.NeedsResume = !in.AgentRunning && st.IsResumable
	if in.AgentRunning || s.State == api.SessionCompleted {
		return st
	}
	var reason string
	switch {
	case in.WorkspaceMissing != "":
		// Before the agent's own reasons: whatever it could resume, there
		// is no workspace to resume it in.
		reason = api.ReasonWorkspaceMissing
	case in.SupportsResume != nil && !*in.SupportsResume:
		reason = api.ReasonNotResumable
	case in.NodeUnavailable != "":
		reason = api.ReasonNodeUnavailable
	case !s.HasResumeToken:
		reason = api.ReasonMissingResumeToken
	case s.StateReason == api.ReasonExecutorLost || s.StateReason == api.ReasonAgentNotRunning:
		reason = s.StateReason
	case in.Executor != nil && in.Executor.Status == api.ExecutorError:
		reason = api.ReasonExecutorLost
	default:
		reason = api.ReasonAgentNotRunning
	}
	st.ResumeReason = strPtr(reason)
	st.ResumeMessage = strPtr(resumeMessages[reason])
	switch reason {
	case api.ReasonNodeUnavailable:
		st.ResumeMessage = strPtr(NodeUnavailableMessage(in.NodeUnavailable))
		return st
	case api.ReasonWorkspaceMissing:
		st.ResumeMessage = strPtr(WorkspaceMissingMessage(in.WorkspaceMissing))
		return st
	}
	if s.State == api.SessionCreated || s.State == api.SessionStarting {
		// The agent is not running yet, so a reason is given; the sentence
		// says what is happening rather than ask for a resume or a new
		// session while the start is under way.
		st.ResumeMessage = strPtr(startingMessage)
	}
	return st
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func lessByTime(a, b time.Time, idA, idB string) bool {
	if a.Equal(b) {
		return idA < idB
	}
	return a.Before(b)
}
