package sessions

import (
	"slices"
	"sync"

	"github.com/paddockhq/paddock/api"
)

// agentFacts is what a live agent announced of itself through agentctl's
// events (commands_updated, mode_updated), for the status object. They are
// not replicated: a new leader learns them from the events it catches up
// with, or the API asks agentctl.
type agentFacts struct {
	mu       sync.Mutex
	commands []api.AgentCommand
	modes    *api.AgentModes
	known    bool
}

func (f *agentFacts) setCommands(c []api.AgentCommand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands, f.known = slices.Clone(c), true
}

func (f *agentFacts) setModes(m api.AgentModes) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m.Available = slices.Clone(m.Available)
	f.modes, f.known = &m, true
}

// get returns copies of the facts, and whether any was announced.
func (f *agentFacts) get() ([]api.AgentCommand, *api.AgentModes, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var modes *api.AgentModes
	if f.modes != nil {
		m := *f.modes
		m.Available = slices.Clone(m.Available)
		modes = &m
	}
	return slices.Clone(f.commands), modes, f.known
}

// AgentFacts returns the commands and modes the session's live agent
// announced since this leader attached it; ok is false when it announced
// none here (or does not run here): ask its agentctl.
func (m *Manager) AgentFacts(sessionID string) (commands []api.AgentCommand, modes *api.AgentModes, ok bool) {
	e := m.live1(sessionID)
	if e == nil {
		return nil, nil, false
	}
	return e.facts.get()
}
