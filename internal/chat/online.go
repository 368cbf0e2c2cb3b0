package chat

import (
	"sync"

	"github.com/parleyim/parley/internal/store"
)

// onlineIndex keeps, for each group this node has loaded, which of its
// members have a session on this node, so delivering a group message costs
// work in proportion to the members online, not to the group's size.
//
// Ordering rule: a session is added to the registry before onOpen and
// removed before onClose, and track reads the registry under mu, so a
// session opening while its group loads is counted by one or the other.
type onlineIndex struct {
	mu sync.Mutex
	// Guarded by mu.
	groups     map[string]*onlineGroup        // group conversation → its online members
	userGroups map[string]map[string]struct{} // user → tracked groups they are a member of
}

type onlineGroup struct {
	users map[string]struct{}
	list  []string // users as a slice, rebuilt when dirty; shared read-only once built
	dirty bool
}

func (o *onlineIndex) init() {
	o.groups = make(map[string]*onlineGroup)
	o.userGroups = make(map[string]map[string]struct{})
}

// track starts following a group's members; isOnline says whether a user has
// a session on this node now.
func (o *onlineIndex) track(conv string, members map[string]store.Member, isOnline func(string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups[conv] != nil {
		return
	}
	g := &onlineGroup{users: make(map[string]struct{}), dirty: true}
	for uid := range members {
		o.link(uid, conv)
		if isOnline(uid) {
			g.users[uid] = struct{}{}
		}
	}
	o.groups[conv] = g
}

func (o *onlineIndex) link(uid, conv string) {
	gs := o.userGroups[uid]
	if gs == nil {
		gs = make(map[string]struct{})
		o.userGroups[uid] = gs
	}
	gs[conv] = struct{}{}
}

// members applies membership changes of a tracked group.
func (o *onlineIndex) members(conv string, changed []store.Member, isOnline func(string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.groups[conv]
	if g == nil {
		return
	}
	for _, m := range changed {
		if m.Left {
			if gs := o.userGroups[m.UserID]; gs != nil {
				delete(gs, conv)
				if len(gs) == 0 {
					delete(o.userGroups, m.UserID)
				}
			}
			delete(g.users, m.UserID)
		} else {
			o.link(m.UserID, conv)
			if isOnline(m.UserID) {
				g.users[m.UserID] = struct{}{}
			}
		}
		g.dirty = true
	}
}

// untrack stops following a group (dropped from the cache; the next load
// tracks it again); members are those it was tracked with.
func (o *onlineIndex) untrack(conv string, members map[string]store.Member) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups[conv] == nil {
		return
	}
	delete(o.groups, conv)
	for uid := range members {
		if gs := o.userGroups[uid]; gs != nil {
			delete(gs, conv)
			if len(gs) == 0 {
				delete(o.userGroups, uid)
			}
		}
	}
}

// onOpen marks uid online in their tracked groups.
func (o *onlineIndex) onOpen(uid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for conv := range o.userGroups[uid] {
		if g := o.groups[conv]; g != nil {
			if _, in := g.users[uid]; !in {
				g.users[uid] = struct{}{}
				g.dirty = true
			}
		}
	}
}

// onClose marks uid offline in their tracked groups once stillOnline is false.
func (o *onlineIndex) onClose(uid string, stillOnline func(string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stillOnline(uid) {
		return
	}
	for conv := range o.userGroups[uid] {
		if g := o.groups[conv]; g != nil {
			if _, in := g.users[uid]; in {
				delete(g.users, uid)
				g.dirty = true
			}
		}
	}
}

// online returns the group's members with a session on this node (a slice
// the caller must not modify), and false when the group is not tracked.
func (o *onlineIndex) online(conv string) ([]string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.groups[conv]
	if g == nil {
		return nil, false
	}
	if g.dirty {
		// A new slice: earlier ones may still be in use by a delivery.
		g.list = make([]string, 0, len(g.users))
		for uid := range g.users {
			g.list = append(g.list, uid)
		}
		g.dirty = false
	}
	return g.list, true
}
