package server

import (
	"context"
	"errors"
	"time"

	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/moderation/hook"
	"github.com/parleyim/parley/internal/store"
)

// config turns a hook of the configuration into the hook package's.
func (h ModerationHook) config() (hook.HookConfig, error) {
	hc := hook.HookConfig{Name: h.Name, URL: h.URL, Secret: h.Secret, Timeout: h.Timeout,
		MaxInFlight: h.MaxInFlight, MaxBatch: h.MaxBatch}
	switch h.Policy {
	case "fail_open":
		hc.Policy = hook.FailOpen
	case "fail_closed":
		hc.Policy = hook.FailClosed
	default:
		return hc, errors.New("policy must be fail_open or fail_closed")
	}
	for _, e := range h.Events {
		hc.Events = append(hc.Events, hook.EventType(e))
	}
	if h.URL == "" || h.Secret == "" || len(h.Events) == 0 {
		return hc, errors.New("url, secret and events are required")
	}
	if h.Timeout < 0 || h.MaxInFlight < 0 || h.MaxBatch < 0 {
		return hc, errors.New("timeout, max_in_flight and max_batch must not be negative")
	}
	return hc, nil
}

// newModeration builds the word filter and the hooks of cfg.
func newModeration(cfg Config, st store.Store) (*moderation.Service, error) {
	mc := moderation.Config{Store: st, FilterContentTypes: cfg.WordFilterContentTypes, Logger: cfg.Logger}
	mc.Hooks, mc.FilterLists = hookConfigs(cfg), configLists(cfg) // reload.go
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return moderation.New(ctx, mc)
}
