package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// Listings of the cluster's runtime plugins, executors and agent profiles.

func runPluginList(e *env, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Plugin, error) {
		return c.Plugins(e.ctx(), o...)
	}, func(plugins []api.Plugin) error {
		if len(plugins) == 0 {
			fmt.Fprintln(e.stdout, "No plugins")
			return nil
		}
		rows := make([][]string, 0, len(plugins))
		for _, p := range plugins {
			rows = append(rows, []string{p.Name, p.Version, p.APIVersion, strconv.FormatBool(p.Healthy),
				strings.Join(sortedTrueKeys(p.Capabilities), ","), p.Error})
		}
		return table(e.stdout, []string{"NAME", "VERSION", "API", "HEALTHY", "CAPABILITIES", "ERROR"}, rows)
	})
}

func executorListFlags(fs *flag.FlagSet) *string {
	return fs.String("session", "", "only executors of this session")
}

func runExecutorList(e *env, sessionID *string, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	session, err := e.resolveID(idSession, *sessionID)
	if err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Executor, error) {
		return c.Executors(e.ctx(), session, o...)
	}, func(execs []api.Executor) error {
		if len(execs) == 0 {
			fmt.Fprintln(e.stdout, "No executors")
			return nil
		}
		now := time.Now()
		rows := make([][]string, 0, len(execs))
		for _, x := range execs {
			pid := "-"
			if x.PID > 0 {
				pid = strconv.Itoa(x.PID)
			}
			rows = append(rows, []string{x.ID, x.SessionID, x.Runtime, x.Node, string(x.Status), pid,
				age(x.LastSeenAt, now), x.ErrorMessage})
		}
		return table(e.stdout, []string{"ID", "SESSION", "RUNTIME", "NODE", "STATUS", "PID", "LAST SEEN", "ERROR"}, rows)
	})
}

func runAgentList(e *env, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Agent, error) {
		return c.Agents(e.ctx(), o...)
	}, func(agents []api.Agent) error {
		if len(agents) == 0 {
			fmt.Fprintln(e.stdout, "No agents")
			return nil
		}
		rows := make([][]string, 0, len(agents))
		for _, a := range agents {
			resume := "unknown"
			if a.SupportsSessionResume != nil {
				resume = map[bool]string{true: "yes", false: "no"}[*a.SupportsSessionResume]
			}
			rows = append(rows, []string{a.Name, a.Protocol, resume, a.ResumeSupport, strings.Join(a.Command, " ")})
		}
		return table(e.stdout, []string{"NAME", "PROTOCOL", "RESUME", "SOURCE", "COMMAND"}, rows)
	})
}
