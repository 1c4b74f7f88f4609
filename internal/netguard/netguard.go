// Package netguard keeps the server's own outbound HTTP calls (webhook
// deliveries, heartbeat checks) away from addresses a user of the API should
// not reach through the server: loopback, private, link-local (cloud
// metadata at 169.254.169.254 included) and other non-public networks —
// server-side request forgery.
//
// A Guard resolves the host itself, refuses every address that is not
// allowed, connects to the address it checked, and checks again in the
// dialer's control hook the address it actually connects to, so a DNS answer
// that changes between the check and the call (DNS rebinding) cannot slip
// through. An HTTP client whose transport dials through a Guard is guarded
// on every hop, redirects included; it must not use a proxy (a proxy would
// dial on its behalf, past the check).
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Resolver resolves host names; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard decides which addresses outbound calls may reach, and dials them.
// The zero Guard allows public addresses only.
type Guard struct {
	// AllowPrivate lets calls reach loopback, private, link-local and other
	// non-public addresses.
	AllowPrivate bool
	// AllowNetworks lets calls reach these networks even when AllowPrivate
	// is off (e.g. one internal receiver).
	AllowNetworks []netip.Prefix
	// Resolver resolves hosts (default net.DefaultResolver).
	Resolver Resolver
	// DialTimeout bounds one connection attempt (default 10 s).
	DialTimeout time.Duration
	// What names the calls in refusals ("webhook", "heartbeat check").
	What string
	// Settings names the configuration that would allow a refused address,
	// for the refusal's message ("webhooks.allowPrivate or … allowNetworks").
	Settings string
}

// RefusedError says an address was refused by the guard.
type RefusedError struct {
	Host     string
	Addr     netip.Addr
	What     string // what was calling: "webhook", "heartbeat check"
	Settings string // the configuration that would allow it
}

func (e *RefusedError) Error() string {
	what := e.What
	if what == "" {
		what = "outbound"
	}
	msg := fmt.Sprintf("%s address %s of %s is not public", what, e.Addr, e.Host)
	if e.Settings != "" {
		msg += "; to call it, set " + e.Settings
	}
	return msg
}

// Allowed reports whether ip may be called.
func (g *Guard) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range g.AllowNetworks {
		if p.Contains(ip) {
			return true
		}
	}
	if g.AllowPrivate {
		return true
	}
	return Public(ip)
}

// DialContext resolves the host of addr, refuses the addresses that are not
// allowed and connects to one that is. Use it as an http.Transport's
// DialContext.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	res := g.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	ips, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	timeout := g.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var last error
	for _, ip := range ips {
		ip = ip.Unmap()
		if !g.Allowed(ip) {
			last = g.refuse(host, ip)
			continue
		}
		dialer := &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !g.Allowed(ap.Addr()) {
				return g.refuse(host, ap.Addr())
			}
			return nil
		}}
		conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("%s resolves to no address", host)
	}
	return nil, last
}

// CheckURL refuses, with a *RefusedError, a URL whose host is an address
// the guard does not allow: what is checked when a URL is accepted (a
// webhook's at submission, a heartbeat check's at creation), so that a call
// bound to fail is refused at once. A host name passes: what it resolves
// to may change, and is checked when it is called (DialContext). The URL's
// form is the caller's to check; one that does not parse passes.
func (g *Guard) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	if ip = ip.Unmap(); !g.Allowed(ip) {
		return g.refuse(u.Hostname(), ip)
	}
	return nil
}

func (g *Guard) refuse(host string, ip netip.Addr) error {
	return &RefusedError{Host: host, Addr: ip, What: g.What, Settings: g.Settings}
}

// Public reports whether ip is a public unicast address: not loopback,
// private, link-local (cloud metadata at 169.254.169.254 included),
// unspecified, multicast, shared (100.64.0.0/10) or otherwise reserved.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("2001:db8::/32"),
}
