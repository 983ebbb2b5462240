package plugins

import (
	"encoding/json"
	"fmt"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
)

// Status is one plugin as this server tracks it: its capabilities as the
// runtime API declares them (runtime.Capabilities). On the wire it is an
// api.Plugin, whose capabilities are one name → bool map: MarshalJSON and
// UnmarshalJSON convert (Wire, StatusOf), so the JSON form is declared once,
// in package api.
type Status struct {
	Name         string
	Version      string
	APIVersion   string
	Capabilities runtime.Capabilities
	Healthy      bool
	// Error says why the plugin is unhealthy ("" when healthy).
	Error string
	// PID is the plugin process id (0 when not running).
	PID int
	// Restarts counts this server's attempts to start the plugin again
	// after it was lost (exited or stopped answering).
	Restarts int
}

// Capability names of the fields of runtime.Capabilities in JSON.
const (
	CapSupportsWorkspaceOnly     = "supports_workspace_only"
	CapSurvivesSupervisorRestart = "survives_supervisor_restart"
	CapNodeLocal                 = "node_local"
)

// CapabilitiesMap flattens c into one name → bool map (Extra first, so the
// named fields win over an Extra entry of the same name).
func CapabilitiesMap(c runtime.Capabilities) map[string]bool {
	out := make(map[string]bool, len(c.Extra)+3)
	for k, v := range c.Extra {
		out[k] = v
	}
	out[CapSupportsWorkspaceOnly] = c.SupportsWorkspaceOnly
	out[CapSurvivesSupervisorRestart] = c.SurvivesSupervisorRestart
	out[CapNodeLocal] = c.NodeLocal
	return out
}

// CapabilitiesFromMap is the inverse of CapabilitiesMap (Extra is nil when
// there are no other names).
func CapabilitiesFromMap(m map[string]bool) runtime.Capabilities {
	var c runtime.Capabilities
	for k, v := range m {
		switch k {
		case CapSupportsWorkspaceOnly:
			c.SupportsWorkspaceOnly = v
		case CapSurvivesSupervisorRestart:
			c.SurvivesSupervisorRestart = v
		case CapNodeLocal:
			c.NodeLocal = v
		default:
			if c.Extra == nil {
				c.Extra = map[string]bool{}
			}
			c.Extra[k] = v
		}
	}
	return c
}

// Wire is s as GET /v1/plugins sends it.
func (s Status) Wire() api.Plugin {
	return api.Plugin{
		Name: s.Name, Version: s.Version, APIVersion: s.APIVersion,
		Capabilities: CapabilitiesMap(s.Capabilities),
		Healthy:      s.Healthy, Error: s.Error, PID: s.PID, Restarts: s.Restarts,
	}
}

// StatusOf is the inverse of Wire.
func StatusOf(p api.Plugin) Status {
	return Status{
		Name: p.Name, Version: p.Version, APIVersion: p.APIVersion,
		Capabilities: CapabilitiesFromMap(p.Capabilities),
		Healthy:      p.Healthy, Error: p.Error, PID: p.PID, Restarts: p.Restarts,
	}
}

// MarshalJSON writes the api.Plugin form.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.Wire())
}

// UnmarshalJSON reads the api.Plugin form.
func (s *Status) UnmarshalJSON(data []byte) error {
	var p api.Plugin
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("decode plugin status: %w", err)
	}
	*s = StatusOf(p)
	return nil
}
