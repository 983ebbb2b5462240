package api

// Plugin is one runtime plugin as GET /v1/plugins and `paddock plugin list`
// show it:
//
//	{"name":"standalone","version":"0.1.0","api_version":"1",
//	 "capabilities":{"supports_workspace_only":true,"survives_supervisor_restart":true,"node_local":true, …extra},
//	 "healthy":true,"error":"","pid":1234,"restarts":0}
//
// Capabilities holds every capability by name, the named ones and the
// plugin's extra ones alike.
type Plugin struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	APIVersion   string          `json:"api_version"`
	Capabilities map[string]bool `json:"capabilities"`
	Healthy      bool            `json:"healthy"`
	// Error says why the plugin is unhealthy ("" when healthy).
	Error string `json:"error"`
	// PID is the plugin process id (0 when not running).
	PID int `json:"pid"`
	// Restarts counts the server's attempts to start the plugin again
	// after it was lost (exited or stopped answering).
	Restarts int `json:"restarts"`
}
