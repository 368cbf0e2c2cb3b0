package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Plan is setup shared by every load process of a run, done once by the
// coordinator before the processes start (the worker protocol has no step
// where processes could agree on it): the big group of fanout and mixed,
// created with all its members. Each process then connects its slice of the
// members (see Config.Part) and knows every stream to verify.
type Plan struct {
	Groups []PlanGroup `json:"groups"`
}

// PlanGroup is one group made by the coordinator. Member i is
// MemberPrefix + i; member 0 is the owner. In fanout and mixed members
// 0..senders-1 send and the next online_members receive.
type PlanGroup struct {
	ConversationID string `json:"conversation_id"`
	MemberPrefix   string `json:"member_prefix"`
	Members        int    `json:"members"`
	// Seq is the message every member reacts to (reactions).
	Seq uint64 `json:"seq,omitempty"`
}

// Member returns member i's user id.
func (g PlanGroup) Member(i int) string { return g.MemberPrefix + strconv.Itoa(i) }

// isGroupScenario says whether a scenario uses the group machinery of
// scen_groups.go (its shares are split by Part, not by dividing -c and -t).
func isGroupScenario(name string) bool {
	switch name {
	case "group", "send-rate", "fanout", "mixed":
		return true
	}
	return false
}

// needsPlan says whether a scenario shares a group between processes.
func needsPlan(name string) bool { return name == "fanout" || name == "mixed" || name == "reactions" }

// splitRange is share i of n of [0, total): contiguous, sizes differing by
// at most one.
func splitRange(total, i, n int) (lo, hi int) {
	q, r := total/n, total%n
	lo = i*q + min(i, r)
	hi = lo + q
	if i < r {
		hi++
	}
	return lo, hi
}

// unitBudget is unit u's part of a budget of total requests spread evenly
// over units.
func unitBudget(total, units, u int) int {
	if units == 0 {
		return 0
	}
	b := total / units
	if u < total%units {
		b++
	}
	return b
}

// groupLayout is the run-wide shape of a group scenario: its sending units
// (senders, groups or pairs, each with its share of -c) in one index space.
type groupLayout struct {
	pairs, groups, bigSenders, bigReceivers int
}

func (c Config) layout() groupLayout {
	switch c.Scenario {
	case "group":
		return groupLayout{groups: c.Concurrency}
	case "send-rate":
		return groupLayout{groups: c.Groups}
	case "fanout":
		return groupLayout{bigSenders: c.Concurrency, bigReceivers: c.OnlineMembers}
	case "mixed":
		return groupLayout{pairs: c.Pairs, groups: c.Groups, bigSenders: c.Concurrency, bigReceivers: c.OnlineMembers}
	}
	return groupLayout{}
}

// groupShare fills in share i of n of a group scenario: the budget of the
// sending units in its ranges (pairs, groups, big-group senders), or Idle.
func (c Config) groupShare(s *Config, i, n int) {
	l := c.layout()
	units := l.pairs + l.groups + l.bigSenders
	count, local, base := 0, 0, 0
	for _, total := range []int{l.pairs, l.groups, l.bigSenders} {
		lo, hi := splitRange(total, i, n)
		for u := lo; u < hi; u++ {
			count += unitBudget(c.Count, units, base+u)
		}
		local += hi - lo
		base += total
	}
	rlo, rhi := splitRange(l.bigReceivers, i, n)
	s.Count = count
	s.SendNone = c.Count > 0 && count == 0 // (Count 0 would mean no limit)
	s.Idle = local == 0 && rhi == rlo
}

// validateGroups checks the flags of the group scenarios.
func (c Config) validateGroups() []error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	switch c.Scenario {
	case "group":
		check(c.Members >= 2 && c.Members <= 100000, "-m must be 2..100000")
	case "send-rate":
		check(c.Groups >= 1, "--groups must be >= 1")
		check(c.Members >= 2, "-m must be >= 2")
		check(c.GroupOnline >= 0 && c.GroupOnline < c.Members, "--group-online must be 0..m-1")
	case "fanout", "mixed":
		check(c.OnlineMembers >= 0, "--online must be >= 0")
		check(c.Members >= c.Concurrency+c.OnlineMembers, "-m must hold the -t senders and the --online receivers (%d > %d)", c.Concurrency+c.OnlineMembers, c.Members)
		check(c.Members <= 100000, "-m must be at most 100000 (the server's default group limit)")
	}
	if c.Scenario == "mixed" {
		check(c.Pairs >= 0 && c.Groups >= 0, "--pairs and --groups must be >= 0")
		check(c.Groups == 0 || c.GroupSize >= 2, "--group-size must be >= 2")
		check(c.Groups == 0 || c.GroupOnline >= 0 && c.GroupOnline < c.GroupSize, "--group-online must be 0..group-size-1")
		check(c.GroupRate >= 0 && c.BigRate >= 0, "rates must be >= 0")
	}
	return errs
}

// makePlan creates the big group of fanout and mixed through its owner's
// connection: CreateGroup with the first 1,000 members, then AddMembers in
// requests of 1,000 (the protocol's limit per request).
func makePlan(ctx context.Context, cfg Config, progress io.Writer) (*Plan, error) {
	t0 := time.Now()
	e := newEnv(cfg)
	g := PlanGroup{MemberPrefix: cfg.Prefix + "big-", Members: cfg.Members}
	if cfg.Scenario == "reactions" {
		// The -m reacting members and one more who reads the final counts.
		g.MemberPrefix, g.Members = cfg.Prefix+"react-", cfg.Members+1
	}
	toks, err := e.MintTokens(ctx, []string{g.Member(0)})
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, e.ClientOptions(toks[0], "setup"))
	if err != nil {
		return nil, fmt.Errorf("connect the group's owner: %w", err)
	}
	defer c.Close()
	ids := make([]string, 0, g.Members-1)
	for i := 1; i < g.Members; i++ {
		ids = append(ids, g.Member(i))
	}
	if g.ConversationID, err = createGroup(ctx, c, "bench big group", ids); err != nil {
		return nil, err
	}
	if cfg.Scenario == "reactions" {
		// The message every member reacts to.
		ack, err := c.Send(ctx, &pb.Send{ConversationId: g.ConversationID, ContentType: "text/plain", Payload: []byte("react to this")})
		if err != nil {
			return nil, fmt.Errorf("send the message to react to: %w", err)
		}
		g.Seq = ack.Seq
	}
	if progress != nil {
		fmt.Fprintf(progress, "setup: group %s with %d members created in %.1fs\n", g.ConversationID, g.Members, time.Since(t0).Seconds())
	}
	return &Plan{Groups: []PlanGroup{g}}, nil
}

// maxMembersPerRequest is the protocol's limit on user ids in one
// CreateGroup or AddMembers.
const maxMembersPerRequest = 1000

// createGroup makes a group owned by c's user with members (not counting
// the owner) and returns its conversation id.
func createGroup(ctx context.Context, c *client.Client, name string, members []string) (string, error) {
	first := members[:min(len(members), maxMembersPerRequest)]
	g, err := c.CreateGroup(ctx, &pb.CreateGroup{Name: name, UserIds: first})
	if err != nil {
		return "", fmt.Errorf("create group: %w", err)
	}
	for rest := members[len(first):]; len(rest) > 0; {
		n := min(len(rest), maxMembersPerRequest)
		if err := c.AddMembers(ctx, g.ConversationId, rest[:n]...); err != nil {
			return "", fmt.Errorf("add members to %s: %w", g.ConversationId, err)
		}
		rest = rest[n:]
	}
	if g.ConversationId == "" {
		return "", errors.New("create group: no conversation id in the reply")
	}
	return g.ConversationId, nil
}

// streamInterval is the pause between one stream's sends for a total rate
// shared by streams (0: no pause).
func streamInterval(rate float64, streams int) time.Duration {
	if rate <= 0 || streams <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(streams) / rate * float64(time.Second)))
}
