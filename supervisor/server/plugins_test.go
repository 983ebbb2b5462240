package server

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/client"
)

// TestPluginSchemaRoute reads the standalone plugin's config schema from a
// real server and its real plugin process: every attribute has a type and a
// description. An unconfigured name is a 404 that says what to run.
func TestPluginSchemaRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	schema, err := c.client(0).PluginSchema(ctx(t), "standalone")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]client.SchemaAttribute{}
	for _, a := range schema.Attributes {
		byName[a.Name] = a
		if a.Type == "" || a.Description == "" {
			t.Errorf("attribute %s has type %q and description %q; both should be set", a.Name, a.Type, a.Description)
		}
	}
	if a, ok := byName["workspace_root"]; !ok || a.Type != "string" {
		t.Errorf("workspace_root: %+v (present %v); want a string attribute", a, ok)
	}

	status, code, body := rawCall(t, "GET", "http://"+c.servers[0].HTTPAddr()+"/v1/plugins/nope/schema", testToken, "", nil)
	var e struct{ Error struct{ Message string } }
	_ = json.Unmarshal(body, &e)
	if status != 404 || code != "not_found" || e.Error.Message == "" {
		t.Errorf("unknown plugin: %d %s %s", status, code, body)
	}
}
