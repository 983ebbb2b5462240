package plugins

import (
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/shared/runtime"
)

// supervise watches inst's plugin process until the Manager closes, and
// restarts it with exponential backoff whenever it exits or stops answering.
func (m *Manager) supervise(inst *instance) {
	defer m.wg.Done()
	backoff := m.opts.RestartBackoffMin
	for {
		m.mu.Lock()
		c, pid := inst.client, inst.pid
		m.mu.Unlock()
		up := time.Now()
		reason := m.watch(c, pid)
		if m.ctx.Err() != nil {
			return
		}
		if time.Since(up) >= m.opts.RestartBackoffMax {
			backoff = m.opts.RestartBackoffMin
		}
		// Make sure a hung process is gone before starting another.
		m.killClient(c, pid)
		m.removeReattach(inst.name)
		m.mu.Lock()
		inst.client, inst.pid = nil, 0
		m.mu.Unlock()
		for {
			msg := fmt.Sprintf("%s; restarting in %s", reason, backoff)
			m.setUnhealthy(inst, msg)
			m.logger.Error("runtime plugin lost", "plugin", inst.name, "error", reason, "restart_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-m.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, m.opts.RestartBackoffMax)
			m.mu.Lock()
			inst.restarts++
			m.mu.Unlock()
			_, err := m.load(m.ctx, inst, false)
			if err == nil {
				break
			}
			if m.ctx.Err() != nil {
				return
			}
			reason = "restart failed: " + condense(err)
		}
	}
}

// watch returns why c is lost: its process exited, or it failed two health
// checks in a row. It returns "" when the Manager closes.
func (m *Manager) watch(c *runtime.Client, pid int) string {
	poll := time.NewTicker(exitPollInterval)
	defer poll.Stop()
	health := time.NewTicker(m.opts.HealthInterval)
	defer health.Stop()
	failures := 0
	for {
		select {
		case <-m.ctx.Done():
			return ""
		case <-poll.C:
			if c.Exited() || pid > 0 && processGone(pid) {
				return "plugin process exited"
			}
		case <-health.C:
			ctx, cancel := context.WithTimeout(m.ctx, m.opts.LoadTimeout)
			_, err := c.Runtime.Info(ctx)
			cancel()
			if m.ctx.Err() != nil {
				return ""
			}
			if err == nil {
				failures = 0
				continue
			}
			failures++
			if c.Exited() {
				return "plugin process exited"
			}
			if failures >= 2 {
				return fmt.Sprintf("plugin stopped answering: %v", err)
			}
		}
	}
}
