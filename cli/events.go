package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

type eventsOpts struct{ task, session *string }

func eventsFlags(fs *flag.FlagSet) *eventsOpts {
	return &eventsOpts{
		task:    fs.String("task", "", "only events of this task"),
		session: fs.String("session", "", "only events of this session"),
	}
}

// runEvents streams events until interrupted, reconnecting after the last
// event it printed when the stream drops.
func runEvents(e *env, o *eventsOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	var f client.EventFilter
	var err error
	if f.TaskID, err = e.resolveID(idTask, *o.task); err != nil {
		return err
	}
	if f.SessionID, err = e.resolveID(idSession, *o.session); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return followEvents(ctx, c, f, 0, func(ev api.Event) error { return e.printEvent(ev) })
}

// followEvents calls fn for every event of filter after index since, until
// ctx ends (then it returns nil) or fn fails. A dropped stream is opened
// again after the last event seen, so nothing is skipped or repeated.
func followEvents(ctx context.Context, c *client.Client, f client.EventFilter, since uint64, fn func(api.Event) error) error {
	return watchEvents(ctx, c, f, since, fn, nil)
}

// watchEvents is followEvents that also tells link (when not nil) that the
// stream dropped (false) and, once it is open again, that it is back (true).
func watchEvents(ctx context.Context, c *client.Client, f client.EventFilter, since uint64, fn func(api.Event) error, link func(up bool)) error {
	backoff := attachBackoffMin
	down := false
	for {
		stream, err := c.Events(ctx, f, since)
		if err == nil {
			backoff = attachBackoffMin
			if down && link != nil {
				link(true)
			}
			down = false
			for {
				ev, nerr := stream.Next()
				if nerr != nil {
					break
				}
				since = max(since, ev.Index)
				if err := fn(ev); err != nil {
					stream.Close()
					return err
				}
			}
			stream.Close()
			if ctx.Err() == nil && link != nil {
				link(false)
			}
			down = true
		} else {
			var ae *client.APIError
			if errors.As(err, &ae) && (ae.Code == "unauthorized" || ae.Code == "forbidden") {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, attachBackoffMax)
	}
}

// printEvent prints one event: a JSON line with -json, else a line of text.
func (e *env) printEvent(ev api.Event) error {
	if e.g.json {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	var data []string
	for _, k := range sortedKeys(ev.Data) {
		v := ev.Data[k]
		if m, ok := v.(map[string]any); ok && k == "message" {
			v = fmt.Sprintf("%v: %q", m["role"], m["text"])
		}
		data = append(data, fmt.Sprintf("%s=%v", k, v))
	}
	_, err := fmt.Fprintf(e.stdout, "%d  %s  session=%s task=%s  %s\n", ev.Index, ev.Type, cell(ev.SessionID), cell(ev.TaskID), noControls(strings.Join(data, " "), ""))
	return err
}

func sortedKeys(m map[string]any) []string {
	keys := make(map[string]bool, len(m))
	for k := range m {
		keys[k] = true
	}
	return sortedTrueKeys(keys)
}

func followFlags(fs *flag.FlagSet) *bool {
	return fs.Bool("f", false, "follow: print new messages as they come, until interrupted")
}

// followMessages prints each message of a session once it is complete, as
// turns happen, until ctx ends or the session is deleted; a tool call or
// plan is printed again when it changes. printed maps a message id to the
// entryKey it was printed with.
func followMessages(ctx context.Context, e *env, c *client.Client, id string, printed map[string]string) error {
	st, err := c.Status(ctx, client.Stale())
	if err != nil {
		return err
	}
	flush := func() error {
		msgs, err := c.Messages(ctx, id)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if key := entryKey(m); m.Complete && printed[m.ID] != key {
				printed[m.ID] = key
				e.printMessage(m)
			}
		}
		return nil
	}
	if err := flush(); err != nil {
		return err
	}
	return followEvents(ctx, c, client.EventFilter{SessionID: id}, st.AppliedIndex, func(ev api.Event) error {
		switch ev.Type {
		case api.EventMessageAdded, api.EventMessageUpdated:
			if m, ok := eventMessage(ev); ok && m.Complete && printed[m.ID] != entryKey(m) {
				return flush()
			}
		case api.EventStateChanged:
			if to, _ := ev.Data["to"].(string); to == string(api.SessionCompleted) {
				_ = flush()
				return errSessionEnded
			}
		}
		return nil
	})
}

// errSessionEnded ends a follow of a deleted session.
var errSessionEnded = errors.New("session ended")
