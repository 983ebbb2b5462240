package plugins

import (
	"encoding/json"
	"fmt"

	"github.com/paddockhq/paddock/shared/runtime"
)

// Status is one plugin as GET /v1/plugins and `paddock plugin list` show it.
// Its JSON form is
//
//	{"name":"standalone","version":"0.1.0","api_version":"1",
//	 "capabilities":{"supports_workspace_only":true,"survives_supervisor_restart":true,"node_local":true, …extra},
//	 "healthy":true,"error":"","pid":1234,"restarts":0}
//
// where the capabilities object also holds every Extra capability by name.
type Status struct {
	Name         string               `json:"name"`
	Version      string               `json:"version"`
	APIVersion   string               `json:"api_version"`
	Capabilities runtime.Capabilities `json:"capabilities"`
	Healthy      bool                 `json:"healthy"`
	// Error says why the plugin is unhealthy ("" when healthy).
	Error string `json:"error"`
	// PID is the plugin process id (0 when not running).
	PID int `json:"pid"`
	// Restarts counts this server's attempts to start the plugin again
	// after it was lost (exited or stopped answering).
	Restarts int `json:"restarts"`
}

// Capability names of the fields of runtime.Capabilities in JSON.
const (
	CapSupportsWorkspaceOnly     = "supports_workspace_only"
	CapSurvivesSupervisorRestart = "survives_supervisor_restart"
	CapNodeLocal                 = "node_local"
)

type statusJSON struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	APIVersion   string          `json:"api_version"`
	Capabilities map[string]bool `json:"capabilities"`
	Healthy      bool            `json:"healthy"`
	Error        string          `json:"error"`
	PID          int             `json:"pid"`
	Restarts     int             `json:"restarts"`
}

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

// MarshalJSON writes the documented JSON form.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(statusJSON{
		Name: s.Name, Version: s.Version, APIVersion: s.APIVersion,
		Capabilities: CapabilitiesMap(s.Capabilities),
		Healthy:      s.Healthy, Error: s.Error, PID: s.PID, Restarts: s.Restarts,
	})
}

// UnmarshalJSON reads the documented JSON form.
func (s *Status) UnmarshalJSON(data []byte) error {
	var j statusJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("decode plugin status: %w", err)
	}
	*s = Status{
		Name: j.Name, Version: j.Version, APIVersion: j.APIVersion,
		Capabilities: CapabilitiesFromMap(j.Capabilities),
		Healthy:      j.Healthy, Error: j.Error, PID: j.PID, Restarts: j.Restarts,
	}
	return nil
}
