package agentctl

import (
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl/acpagent"
)

// The agent's work in the transcript: thoughts stream like its replies,
// each tool call is one entry every update merges into, and each turn has
// at most one plan entry that updates replace. Tool and plan entries are
// published whole (complete) on every change, as text updates are.

// endStream completes the message being streamed, if any; m.mu must be
// held. Called before another entry is added, so the transcript keeps the
// order the agent said things in (a reply resumed after a tool call is a
// new message).
func (m *manager) endStream() {
	if m.current != nil {
		m.updateMessage(m.current, m.current.Text, true)
		m.current = nil
	}
}

// streamChunk adds a chunk of agent text or thought (role) to the message
// being streamed, starting a new one when the stream switches role;
// m.mu must be held.
func (m *manager) streamChunk(role, text string) {
	if m.current != nil && m.current.Role != role {
		m.endStream()
	}
	if m.current == nil {
		m.current = m.addMessage(role, text, false)
		return
	}
	if m.streamed.String() != m.current.Text { // a new message (or one set whole)
		m.streamed.Reset()
		m.streamed.WriteString(m.current.Text)
	}
	m.streamed.WriteString(text)
	m.updateMessage(m.current, m.streamed.String(), false)
}

// addEntry adds a complete tool or plan entry; m.mu must be held.
func (m *manager) addEntry(role string, tc *api.ToolCall, plan *api.Plan) *Message {
	m.endStream()
	return m.appendMessage(&Message{Role: role, Complete: true, ToolCall: tc, Plan: plan})
}

// republish publishes an entry whose call or plan was replaced; m.mu must
// be held.
func (m *manager) republish(msg *Message) {
	msg.UpdatedAt = time.Now().UTC()
	m.events.publish(EventMessageUpdated, MessageData{Message: *msg})
}

// onToolCall merges a tool_call or tool_call_update into its entry.
func (m *manager) onToolCall(u acpagent.ToolCallUpdate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mergeToolCall(u)
}

// mergeToolCall merges u into the entry of its id, adding the entry when
// there is none (an update of a call never announced is all there is to
// know of it), and returns the merged call (nil for an update without an
// id, which has nothing to merge into); m.mu must be held. Events carry
// copies, so an entry's call is replaced, never changed in place.
func (m *manager) mergeToolCall(u acpagent.ToolCallUpdate) *api.ToolCall {
	if msg := m.tools[u.ID]; u.ID != "" && msg != nil {
		tc := *msg.ToolCall
		u.Apply(&tc)
		msg.ToolCall = &tc
		m.republish(msg)
		return &tc
	}
	if u.ID == "" && !u.Create {
		m.log.Debug("tool_call_update without a toolCallId left out")
		return nil
	}
	tc := &api.ToolCall{}
	u.Apply(tc)
	msg := m.addEntry(RoleTool, tc, nil)
	if u.ID != "" {
		m.tools[u.ID] = msg
	}
	return tc
}

// onPlan adds the turn's plan entry, or replaces its plan.
func (m *manager) onPlan(p api.Plan) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plan != nil {
		m.plan.Plan = &p
		m.republish(m.plan)
		return
	}
	m.plan = m.addEntry(RolePlan, nil, &p)
}

// onCommands records the agent's slash commands.
func (m *manager) onCommands(cmds []api.AgentCommand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commands = cmds
	m.events.publish(EventCommandsUpdated, CommandsData{Commands: cmds})
}

// onMode records the agent's current mode (the agent changed it).
func (m *manager) onMode(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setCurrentMode(id)
}

// setCurrentMode records and publishes the current mode; m.mu must be held.
func (m *manager) setCurrentMode(id string) {
	if m.modes == nil {
		m.modes = &api.AgentModes{Available: []api.AgentMode{}}
	}
	if m.modes.CurrentModeID == id {
		return
	}
	// Replaced, not changed: state() hands out the pointer's copy.
	md := *m.modes
	md.CurrentModeID = id
	m.modes = &md
	m.events.publish(EventModeUpdated, ModesData{Modes: md})
}

// setMode asks the agent to switch modes (session/set_mode).
func (m *manager) setMode(ctx context.Context, id string) (AgentState, error) {
	m.mu.Lock()
	a, modes := m.acp, m.modes
	m.mu.Unlock()
	if a == nil {
		return AgentState{}, ErrNoAgent
	}
	known := false
	if modes != nil {
		for _, md := range modes.Available {
			known = known || md.ID == id
		}
	}
	if !known {
		return AgentState{}, fmt.Errorf("%w: the agent offers no mode %q", errBadRequest, id)
	}
	if err := a.SetMode(ctx, id); err != nil {
		return AgentState{}, fmt.Errorf("set mode: %w", err)
	}
	m.mu.Lock()
	if m.acp == a {
		m.setCurrentMode(id)
	}
	m.mu.Unlock()
	return m.state(), nil
}
