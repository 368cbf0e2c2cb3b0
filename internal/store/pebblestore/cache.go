package pebblestore

// genMap is a map bounded to about max entries without per-entry bookkeeping:
// entries go into cur; when cur holds max/2 entries it becomes old and the
// previous old is dropped. A lookup checks both, so an entry lives for at
// least max/2 insertions after its last insert. Recency is what matters for
// the caches here (resends come soon after the original; busy conversations
// stay busy), and this costs one map operation per access.
//
// genMap is not safe for concurrent use; its owner locks.
type genMap[V any] struct {
	cur, old map[string]V
	half     int
}

func newGenMap[V any](max int) *genMap[V] {
	half := max / 2
	if half < 1 {
		half = 1
	}
	return &genMap[V]{cur: make(map[string]V), old: make(map[string]V), half: half}
}

// get looks k up. Callers pass string(b) directly so the lookup does not allocate.
func (g *genMap[V]) get(k string) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.old[k]
	return v, ok
}

func (g *genMap[V]) put(k string, v V) {
	if _, ok := g.cur[k]; !ok && len(g.cur) >= g.half {
		g.old = g.cur
		g.cur = make(map[string]V)
	}
	g.cur[k] = v
}

func (g *genMap[V]) del(k string) {
	delete(g.cur, k)
	delete(g.old, k)
}
