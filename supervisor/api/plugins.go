package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/plugins"
)

// schemaTimeout bounds one ConfigSchema call to a plugin.
const schemaTimeout = 10 * time.Second

// SchemaJSON is a plugin's config schema as GET /v1/plugins/{name}/schema
// returns it.
type SchemaJSON struct {
	Attributes []AttributeJSON `json:"attributes"`
	Blocks     []BlockJSON     `json:"blocks"`
}

// AttributeJSON is one attribute of a SchemaJSON.
type AttributeJSON struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

// BlockJSON is one nested block type of a SchemaJSON.
type BlockJSON struct {
	Type        string     `json:"type"`
	LabelNames  []string   `json:"label_names"`
	Description string     `json:"description"`
	Body        SchemaJSON `json:"body"`
}

func schemaJSON(s runtime.Schema) SchemaJSON {
	out := SchemaJSON{Attributes: []AttributeJSON{}, Blocks: []BlockJSON{}}
	for _, a := range s.Attributes {
		out.Attributes = append(out.Attributes, AttributeJSON{Name: a.Name, Type: a.Type, Required: a.Required, Description: a.Description})
	}
	for _, b := range s.Blocks {
		labels := b.LabelNames
		if labels == nil {
			labels = []string{}
		}
		out.Blocks = append(out.Blocks, BlockJSON{Type: b.Type, LabelNames: labels, Description: b.Description, Body: schemaJSON(b.Body)})
	}
	return out
}

// pluginSchema answers {"plugin":NAME,"schema":{…}}: the attributes and
// blocks the plugin's `config { … }` block takes, with descriptions, as
// the plugin itself declares them.
func (s *Server) pluginSchema(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if s.plugins == nil {
		return errorf(http.StatusNotFound, CodeNotFound, "runtime %q: no runtime plugins on this node", name)
	}
	rt, err := s.plugins.Get(name)
	if errors.Is(err, plugins.ErrUnknownRuntime) {
		return errorf(http.StatusNotFound, CodeNotFound, "%v; `paddock plugin list` shows the configured plugins", err)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), schemaTimeout)
	defer cancel()
	schema, err := rt.ConfigSchema(ctx)
	if err != nil {
		return errorf(http.StatusBadGateway, CodeUnavailable, "runtime %q: config schema: %v", name, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"plugin": name, "schema": schemaJSON(schema)})
	return nil
}
