package gateway

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Admission of new connections beyond the per-IP rate: caps on connections
// that have not authenticated (in all and per client address) and a reserve
// of file descriptors. A flood of sockets that never authenticate would
// otherwise take every descriptor the process may open, and then logins,
// HTTP requests and the store's own files fail until the flood times out.

// Refusal is why a new connection was refused.
type Refusal uint8

const (
	// Admitted: not refused.
	Admitted Refusal = iota
	// RefusedUnauthTotal: MaxUnauth unauthenticated connections are open.
	RefusedUnauthTotal
	// RefusedUnauthIP: MaxUnauthPerIP are open from the client's address.
	RefusedUnauthIP
	// RefusedFDReserve: the process's open descriptors reached
	// MaxOpenFiles-FDReserve.
	RefusedFDReserve
	numRefusals
)

func (r Refusal) String() string {
	switch r {
	case RefusedUnauthTotal:
		return "unauth_total"
	case RefusedUnauthIP:
		return "unauth_ip"
	case RefusedFDReserve:
		return "fd_reserve"
	}
	return "admitted"
}

// Slots a connection holds until it authenticates or closes.
const (
	slotTotal uint32 = 1 << iota // counted in unauthTotal
	slotIP                       // counted in unauthIP under its address
)

// unauthCount counts unauthenticated connections, in all and per address.
type unauthCount struct {
	mu sync.Mutex
	// Guarded by mu.
	total int
	perIP map[netip.Addr]int32 // addresses with at least one; never holds zero
}

// addrIP is the client IP of addr (invalid for non-IP addresses).
func addrIP(addr net.Addr) netip.Addr {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(ta.IP)
	return ip.Unmap()
}

// reserve decides whether a new connection from ip may be served and, if
// so, takes its unauthenticated slots, returned for Conn.slots.
func (g *Gateway) reserve(ip netip.Addr) (uint32, Refusal) {
	if g.cfg.MaxOpenFiles > 0 && g.cfg.FDReserve > 0 && g.fdsAtLeast(g.cfg.MaxOpenFiles-g.cfg.FDReserve) {
		return 0, g.refused(RefusedFDReserve)
	}
	perIP := g.cfg.MaxUnauthPerIP > 0 && ip.IsValid() && !g.unauthExempt(ip)
	u := &g.unauth
	u.mu.Lock()
	defer u.mu.Unlock()
	if g.cfg.MaxUnauth > 0 && u.total >= g.cfg.MaxUnauth {
		return 0, g.refused(RefusedUnauthTotal)
	}
	slots := slotTotal
	if perIP {
		n := u.perIP[ip]
		if int(n) >= g.cfg.MaxUnauthPerIP {
			return 0, g.refused(RefusedUnauthIP)
		}
		u.perIP[ip] = n + 1
		slots |= slotIP
	}
	u.total++
	return slots, Admitted
}

func (g *Gateway) refused(r Refusal) Refusal {
	g.stats.refused[r].Add(1)
	return r
}

func (g *Gateway) unauthExempt(ip netip.Addr) bool {
	for _, p := range g.cfg.UnauthExempt {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// release gives back slots taken by reserve for a connection from addr.
func (g *Gateway) release(slots uint32, addr net.Addr) {
	if slots != 0 {
		g.releaseAddr(slots, addrIP(addr))
	}
}

func (g *Gateway) releaseAddr(slots uint32, ip netip.Addr) {
	if slots == 0 {
		return
	}
	u := &g.unauth
	u.mu.Lock()
	u.total--
	if slots&slotIP != 0 {
		if n := u.perIP[ip]; n > 1 {
			u.perIP[ip] = n - 1
		} else {
			delete(u.perIP, ip)
		}
	}
	u.mu.Unlock()
}

// Unauthenticated is the number of open connections that have not authenticated.
func (g *Gateway) Unauthenticated() int {
	g.unauth.mu.Lock()
	defer g.unauth.mu.Unlock()
	return g.unauth.total
}

// fdsAtLeast reports whether the process holds limit descriptors or more,
// by the last sample plus the connections opened since.
func (g *Gateway) fdsAtLeast(limit int) bool {
	base := g.fdBase.Load()
	if base < 0 {
		return false
	}
	est := func() int { return int(base) + g.Len() + int(g.fdSince.Load()) }
	if est() >= limit-g.cfg.FDReserve {
		// Near the limit: descriptors opened since the sweeper's sample
		// (store files, connections closed meanwhile) matter, so count
		// again, at most every fdResample.
		if now := time.Now().UnixNano(); now-g.fdSampledAt.Load() > int64(fdResample) {
			g.sampleFDs()
			base = g.fdBase.Load()
		}
	}
	return base >= 0 && est() >= limit
}

// ReserveListener applies the descriptor reserve to a listener whose
// connections the Gateway does not serve itself (HTTP: API requests and
// WebSocket upgrades): a connection it accepts while the process holds
// MaxOpenFiles-FDReserve/2 descriptors or more is closed at once and counted
// (RefusedFDReserve). WebSocket upgrades are refused earlier, at
// MaxOpenFiles-FDReserve, so HTTP requests, the admin API among them, keep
// working a little longer, and the last half of the reserve is left to the
// store. Without MaxOpenFiles or FDReserve, ln is returned as it is.
func (g *Gateway) ReserveListener(ln net.Listener) net.Listener {
	if g.cfg.MaxOpenFiles == 0 || g.cfg.FDReserve == 0 {
		return ln
	}
	return &reserveListener{Listener: ln, g: g}
}

type reserveListener struct {
	net.Listener
	g *Gateway
}

func (l *reserveListener) Accept() (net.Conn, error) {
	g := l.g
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		// Counted until the next sample, whether it stays open or not.
		g.fdSince.Add(1)
		if !g.fdsAtLeast(g.cfg.MaxOpenFiles - g.cfg.FDReserve/2) {
			return nc, nil
		}
		_ = nc.Close()
		g.refused(RefusedFDReserve)
	}
}

// fdResample is how often the descriptors are counted again while their
// number is within FDReserve of the reserve (a count lists /proc/self/fd:
// about a millisecond per 10,000 descriptors).
const fdResample = 100 * time.Millisecond

// sampleFDs refreshes the descriptor count the reserve is checked against:
// the open descriptors of the process less the connections counted by Len,
// which reserve adds back live.
func (g *Gateway) sampleFDs() {
	if g.cfg.MaxOpenFiles == 0 || g.cfg.FDReserve == 0 {
		return
	}
	g.fdSampledAt.Store(time.Now().UnixNano())
	g.fdSince.Store(0) // from here the count sees them (counting some twice errs on the safe side)
	open := g.Len()
	n := openFDs()
	if n < 0 {
		g.fdBase.Store(-1) // unknown on this system: no reserve
		return
	}
	g.fdBase.Store(int64(max(n-open, 0)))
}
