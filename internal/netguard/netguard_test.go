package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/netguard"
)

func TestPublic(t *testing.T) {
	t.Parallel()
	for addr, public := range map[string]bool{
		"8.8.8.8": true, "2606:4700::1111": true,
		"127.0.0.1": false, "10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "::1": false, "fe80::1": false, "fc00::1": false, "224.0.0.1": false,
		"::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false,
	} {
		require.Equal(t, public, netguard.Public(netip.MustParseAddr(addr)), addr)
	}
}

type fixedResolver map[string]string

func (r fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, errors.New("no such host")
}

// A guarded client refuses a name that resolves to loopback by default, and
// reaches it when its network is allowed.
func TestDialRefusesPrivateUnlessAllowed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	url := "http://internal.example:" + port + "/"
	client := func(g *netguard.Guard) *http.Client {
		return &http.Client{Transport: &http.Transport{DialContext: g.DialContext, Proxy: nil}}
	}

	g := &netguard.Guard{Resolver: fixedResolver{"internal.example": "127.0.0.1"}, What: "test", Settings: "test.allowPrivate"}
	_, err := client(g).Get(url)
	var refused *netguard.RefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "internal.example", refused.Host)
	require.Contains(t, err.Error(), "test address 127.0.0.1 of internal.example is not public; to call it, set test.allowPrivate")

	g.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	resp, err := client(g).Get(url)
	require.NoError(t, err)
	resp.Body.Close()

	g = &netguard.Guard{Resolver: fixedResolver{"internal.example": "127.0.0.1"}, AllowPrivate: true}
	resp, err = client(g).Get(url)
	require.NoError(t, err)
	resp.Body.Close()
}
