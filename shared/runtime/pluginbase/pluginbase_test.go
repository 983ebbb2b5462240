package pluginbase_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
	"github.com/paddockhq/paddock/shared/runtime/pluginbase"
)

type cfg struct{ Name string }

func newBase() *pluginbase.Base[cfg] {
	return pluginbase.New(pluginbase.Options[cfg]{
		Info: runtime.Info{Name: "t", Version: "1"},
		Spec: configspec.Spec[cfg]{Attributes: []configspec.Attribute[cfg]{
			configspec.String("name", "a name", func(c *cfg) *string { return &c.Name }, configspec.NotEmpty)}},
		Defaults: func() cfg { return cfg{Name: "default"} },
	})
}

func TestSetConfigKeepsTheConfigInForceWhenRefused(t *testing.T) {
	b, ctx := newBase(), context.Background()
	if c, set := b.Config(); c.Name != "default" || set {
		t.Fatalf("before SetConfig: %+v set=%v", c, set)
	}
	if info, _ := b.Info(ctx); info.APIVersion != runtime.APIVersion {
		t.Errorf("Info = %+v: the API version defaults to the SDK's", info)
	}
	if s, _ := b.ConfigSchema(ctx); len(s.Attributes) != 1 || s.Attributes[0].Name != "name" {
		t.Errorf("schema = %+v", s)
	}
	if diags, err := b.SetConfig(ctx, runtime.ConfigSource{Filename: "a.hcl", Source: []byte(`name = "x"`)}); err != nil || diags.HasErrors() {
		t.Fatal(err, diags)
	}
	if diags, _ := b.SetConfig(ctx, runtime.ConfigSource{Filename: "a.hcl", Source: []byte(`name = ""`)}); !diags.HasErrors() {
		t.Fatal("an empty name was accepted")
	}
	if c, set := b.Config(); c.Name != "x" || !set {
		t.Fatalf("after a refused SetConfig: %+v set=%v, want the accepted one", c, set)
	}
}

// Operations on one session never overlap; other sessions run alongside.
func TestSessionLocksSerialiseOneSession(t *testing.T) {
	var locks pluginbase.SessionLocks
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer locks.Lock("s1")()
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if i%10 == 0 { // another session is not held up by s1
				unlock := locks.Lock("s2")
				unlock()
			}
			inside.Add(-1)
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d operations on one session ran at once, want 1", most.Load())
	}
}
