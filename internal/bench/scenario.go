package bench

import (
	"context"
	"slices"
)

// Scenario is one kind of load. A run calls Setup (untimed: users, tokens,
// connections), then Run (timed: it returns once the budget is spent — see
// Env.Take — or ctx ends), then Finish (drain and verify, fill in the
// report, close everything). A scenario runs its share of the config in one
// process; the coordinator merges the shares' reports.
type Scenario interface {
	Setup(ctx context.Context, e *Env) error
	Run(ctx context.Context, e *Env) error
	Finish(ctx context.Context, e *Env, r *Report) error
}

// newScenario makes a fresh scenario by name. New ones (group, send-rate,
// fanout, mixed, push) are added here and to Scenarios.
func newScenario(name string) (Scenario, bool) {
	switch name {
	case "login":
		return &loginScenario{}, true
	case "user":
		return &pairScenario{}, true
	case "soak":
		return &pairScenario{soak: true}, true
	case "order":
		return &orderScenario{}, true
	case "conns":
		return &connsScenario{}, true
	case "group", "send-rate", "fanout", "mixed":
		return &groupScenario{kind: name}, true
	case "push":
		return &pushScenario{}, true
	case "push-offline":
		return &pushOfflineScenario{}, true
	case "upload":
		return &uploadScenario{}, true
	case "download":
		return &downloadScenario{}, true
	case "reactions":
		return &reactionsScenario{}, true
	case "stream":
		return &streamScenario{}, true
	case "search":
		return &searchScenario{}, true
	case "keypackages":
		return &keyPackagesScenario{}, true
	}
	return nil, false
}

// Scenarios lists the scenario names, sorted.
func Scenarios() []string {
	s := []string{"conns", "fanout", "group", "keypackages", "login", "mixed", "order", "push", "push-offline", "reactions", "search", "send-rate", "stream", "soak", "upload", "download", "user"}
	slices.Sort(s)
	return s
}

// splittable reports whether a scenario's load can be shared by several
// processes (order is one sender and one receiver; push-offline's push
// stand-in is in the coordinator's process; upload and download check and
// report their files in one process; search's verification needs every
// sender's counts; keypackages checks every claim's package against all
// the others).
func splittable(name string) bool {
	return name != "order" && name != "push-offline" && name != "upload" && name != "download" && name != "search" && name != "keypackages"
}
