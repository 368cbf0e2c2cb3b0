package server

import (
	"context"
	"errors"
	"time"

	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/moderation/hook"
	"github.com/parleyim/parley/internal/moderation/wordfilter"
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
	for _, h := range cfg.ModerationHooks {
		hc, err := h.config() // validated
		if err != nil {
			return nil, err
		}
		mc.Hooks = append(mc.Hooks, hc)
	}
	for _, l := range cfg.WordFilterLists {
		a, _ := moderation.ParseAction(l.Action) // validated
		mc.FilterLists = append(mc.FilterLists, moderation.ConfigList{WordsFile: l.WordsFile, List: wordfilter.List{
			Name: l.Name, Action: a, Words: l.Words, Leet: l.Leet, IgnoreSeparators: l.IgnoreSeparators, WholeWords: l.WholeWords}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return moderation.New(ctx, mc)
}
