package client

import (
	"context"
	"net/http"
)

// PluginSchema is a runtime plugin's config schema (GET
// /v1/plugins/{name}/schema): the attributes and blocks its
// `config { … }` block takes.
type PluginSchema struct {
	Attributes []SchemaAttribute `json:"attributes"`
	Blocks     []SchemaBlock     `json:"blocks"`
}

// SchemaAttribute is one attribute of a PluginSchema.
type SchemaAttribute struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

// SchemaBlock is one nested block type of a PluginSchema.
type SchemaBlock struct {
	Type        string       `json:"type"`
	LabelNames  []string     `json:"label_names"`
	Description string       `json:"description"`
	Body        PluginSchema `json:"body"`
}

// PluginSchema returns the config schema of the runtime plugin name.
func (c *Client) PluginSchema(ctx context.Context, name string, opts ...CallOption) (*PluginSchema, error) {
	var out struct {
		Schema PluginSchema `json:"schema"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/plugins/"+seg(name)+"/schema", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out.Schema, nil
}
