// Package pluginbase holds what every runtime plugin otherwise writes
// again: Info, ConfigSchema and SetConfig over a [configspec.Spec] (the
// configuration in force kept behind a lock, a refused one never replacing
// it), and the per-session lock that serialises operations on one session.
// It plays the part of Nomad's plugins/base. A plugin embeds *[Base]:
//
//	type Runtime struct {
//		*pluginbase.Base[Config]
//		…
//	}
//
//	func New(logger hclog.Logger) *Runtime {
//		return &Runtime{Base: pluginbase.New(pluginbase.Options[Config]{
//			Info: runtime.Info{Name: "mine", Version: "0.1.0"}, Spec: spec, Defaults: defaults, Logger: logger})}
//	}
//
// It imports only shared/runtime, never supervisor/.
package pluginbase

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
)

// Options configure a Base.
type Options[T any] struct {
	// Info names the plugin; an empty APIVersion means runtime.APIVersion.
	Info runtime.Info
	// Spec declares the config body.
	Spec configspec.Spec[T]
	// Defaults returns the configuration before (and beneath) any config
	// body: each SetConfig decodes onto a fresh one.
	Defaults func() T
	// Logger receives the "configured" line; nil discards.
	Logger hclog.Logger
	// LogFields are the key/value pairs logged for an accepted config
	// (never secrets).
	LogFields func(T) []any
}

// Base implements Info, ConfigSchema and SetConfig of runtime.Runtime, and
// holds the configuration in force and the session locks.
type Base[T any] struct {
	opts   Options[T]
	logger hclog.Logger

	mu  sync.RWMutex
	cfg T
	set bool

	// Sessions serialises operations on one session.
	Sessions SessionLocks
}

// New returns a Base holding the configuration of an empty body (the
// defaults, normalised by the Spec's checks), not yet set by SetConfig.
func New[T any](opts Options[T]) *Base[T] {
	if opts.Info.APIVersion == "" {
		opts.Info.APIVersion = runtime.APIVersion
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Base[T]{opts: opts, logger: logger}
	b.cfg, _ = b.Parse(runtime.ConfigSource{Filename: "defaults"})
	return b
}

// Logger is Options.Logger (a discarding logger when that was nil).
func (b *Base[T]) Logger() hclog.Logger { return b.logger }

// Info implements runtime.Runtime.
func (b *Base[T]) Info(context.Context) (runtime.Info, error) { return b.opts.Info, nil }

// ConfigSchema implements runtime.Runtime from the Spec.
func (b *Base[T]) ConfigSchema(context.Context) (runtime.Schema, error) {
	return b.opts.Spec.Schema(), nil
}

// Parse decodes a config body onto the defaults without applying it.
func (b *Base[T]) Parse(src runtime.ConfigSource) (T, hcl.Diagnostics) {
	var cfg T
	if b.opts.Defaults != nil {
		cfg = b.opts.Defaults()
	}
	return b.opts.Spec.Parse(src, cfg)
}

// SetConfig implements runtime.Runtime: a body with error diagnostics is
// refused and the configuration in force stays.
func (b *Base[T]) SetConfig(_ context.Context, src runtime.ConfigSource) (hcl.Diagnostics, error) {
	cfg, diags := b.Parse(src)
	if diags.HasErrors() {
		return diags, nil
	}
	b.mu.Lock()
	b.cfg, b.set = cfg, true
	b.mu.Unlock()
	var fields []any
	if b.opts.LogFields != nil {
		fields = b.opts.LogFields(cfg)
	}
	b.logger.Info("configured", fields...)
	return diags, nil
}

// Config returns the configuration in force and whether SetConfig has
// accepted one (otherwise it is the defaults).
func (b *Base[T]) Config() (T, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.cfg, b.set
}

// SessionLocks serialises operations on one session: Launch, Recover,
// Stop and Destroy of a session never run at once. The zero value is ready.
type SessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Lock locks session and returns its unlock: `defer locks.Lock(id)()`.
func (s *SessionLocks) Lock(session string) (unlock func()) {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*sync.Mutex{}
	}
	l, ok := s.locks[session]
	if !ok {
		l = &sync.Mutex{}
		s.locks[session] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}
