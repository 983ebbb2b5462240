package cli

import (
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/client"
)

// pluginSchemaCommand is `paddock plugin schema NAME`: what a runtime
// plugin's `config { … }` block takes, as the plugin itself declares it.
var pluginSchemaCommand = command{
	path:    "plugin schema",
	args:    "NAME",
	summary: "print a runtime plugin's config schema with descriptions",
	bind:    noFlags(runPluginSchema),
}

func runPluginSchema(e *env, pos []string) error {
	if err := exactArgs(pos, "NAME"); err != nil {
		return err
	}
	name := pos[0]
	return show(e, func(c *client.Client, o []client.CallOption) (*client.PluginSchema, error) {
		return c.PluginSchema(e.ctx(), name, o...)
	}, func(s *client.PluginSchema) error {
		fmt.Fprintf(e.stdout, "plugin %q {\n  config {\n", name)
		printSchema(e, *s, "    ")
		fmt.Fprintln(e.stdout, "  }\n}")
		return nil
	})
}

// printSchema writes a schema as commented HCL: each attribute as
// `name = TYPE` after its description, each block with its body nested.
func printSchema(e *env, s client.PluginSchema, indent string) {
	if len(s.Attributes) == 0 && len(s.Blocks) == 0 {
		fmt.Fprintf(e.stdout, "%s# (no settings)\n", indent)
	}
	for _, a := range s.Attributes {
		desc := a.Description
		if a.Required {
			desc = "required. " + desc
		}
		if desc != "" {
			fmt.Fprintf(e.stdout, "%s# %s\n", indent, desc)
		}
		fmt.Fprintf(e.stdout, "%s%s = %s\n", indent, a.Name, a.Type)
	}
	for _, b := range s.Blocks {
		if b.Description != "" {
			fmt.Fprintf(e.stdout, "%s# %s\n", indent, b.Description)
		}
		labels := ""
		for _, l := range b.LabelNames {
			labels += fmt.Sprintf(" %q", strings.ToUpper(l))
		}
		fmt.Fprintf(e.stdout, "%s%s%s {\n", indent, b.Type, labels)
		printSchema(e, b.Body, indent+"  ")
		fmt.Fprintf(e.stdout, "%s}\n", indent)
	}
}
