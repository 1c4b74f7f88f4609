// Authentication: the configured tokens, and the identity a presented token
// stands for.

package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Token is a configured token: its name, its stored hash and what it may do.
type Token struct {
	Name    string // 1..64 letters, digits, '.', '_' or '-'; unique
	Hash    string // the stored form (HashToken)
	Role    Role
	AgentID string // for RoleAgent, required; for the other roles, empty
	// Lanes are the pull lanes of a RoleWorker token (at least one); the
	// other roles have none.
	Lanes []string
}

// ErrUnauthenticated is the error of a missing or unknown token.
var ErrUnauthenticated = errors.New("a valid bearer token is required")

// Authenticator maps presented tokens to identities.
type Authenticator struct {
	entries []entry

	// known caches the tokens already verified, by their SHA-256: a token
	// is checked against every configured hash once, then found at once.
	// It holds at most one key per configured token (a key is added only
	// when a hash matches), so it never grows past the configuration.
	mu    sync.RWMutex
	known map[[sha256.Size]byte]*Identity
}

type entry struct {
	hash Hash
	id   *Identity
}

// NewAuthenticator checks the tokens and returns their authenticator.
// Errors name the token by its index: "tokens[2].role: …".
func NewAuthenticator(tokens []Token) (*Authenticator, error) {
	a := &Authenticator{known: map[[sha256.Size]byte]*Identity{}}
	names := map[string]bool{}
	for i, t := range tokens {
		at := func(field, format string, args ...any) error {
			return fmt.Errorf("tokens[%d].%s: %s", i, field, fmt.Sprintf(format, args...))
		}
		if !validName(t.Name) {
			return nil, at("name", "%q: 1..64 letters, digits, '.', '_' or '-'", t.Name)
		}
		if names[t.Name] {
			return nil, at("name", "%q is used twice", t.Name)
		}
		names[t.Name] = true
		h, err := ParseHash(t.Hash)
		if err != nil {
			return nil, at("hash", "%v", err)
		}
		switch {
		case t.Role < RoleAdmin || t.Role > RoleWorker:
			return nil, at("role", "%s is not a role (admin, operator, agent, reader or worker)", t.Role)
		case t.Role == RoleAgent && t.AgentID == "":
			return nil, at("agentId", "an agent token is bound to one agent: agentId is required")
		case t.Role == RoleAgent && (len(t.AgentID) > 256 || strings.TrimSpace(t.AgentID) != t.AgentID):
			return nil, at("agentId", "%q is not an agent id (1..256 bytes, no surrounding spaces)", t.AgentID)
		case t.Role != RoleAgent && t.AgentID != "":
			return nil, at("agentId", "only agent tokens are bound to an agent (this one is %s)", t.Role)
		case t.Role == RoleWorker && len(t.Lanes) == 0:
			return nil, at("lanes", "a worker token leases from named pull lanes: lanes is required")
		case t.Role != RoleWorker && len(t.Lanes) > 0:
			return nil, at("lanes", "only worker tokens are limited to lanes (this one is %s)", t.Role)
		}
		for j, l := range t.Lanes {
			if l == "" || len(l) > 64 || strings.TrimSpace(l) != l {
				return nil, at(fmt.Sprintf("lanes[%d]", j), "%q is not a lane name", l)
			}
		}
		a.entries = append(a.entries, entry{hash: h, id: &Identity{Name: t.Name, Role: t.Role, AgentID: t.AgentID, Lanes: slices.Clone(t.Lanes)}})
	}
	return a, nil
}

// Enabled reports whether any token is configured: without one,
// authentication is off.
func (a *Authenticator) Enabled() bool { return a != nil && len(a.entries) > 0 }

// Identities lists the configured identities, in configuration order.
func (a *Authenticator) Identities() []*Identity {
	if a == nil {
		return nil
	}
	out := make([]*Identity, len(a.entries))
	for i, e := range a.entries {
		out[i] = e.id
	}
	return out
}

// Authenticate returns the identity of a token, or ErrUnauthenticated.
// With authentication off, every request is Anonymous.
func (a *Authenticator) Authenticate(token string) (*Identity, error) {
	if !a.Enabled() {
		return Anonymous(), nil
	}
	if token == "" || len(token) > MaxTokenLength {
		return nil, ErrUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	a.mu.RLock()
	id := a.known[key]
	a.mu.RUnlock()
	if id != nil {
		return id, nil
	}
	// Every hash is checked, whichever matches: the time taken says
	// nothing about which entry came close.
	for _, e := range a.entries {
		if e.hash.Matches(token) {
			id = e.id
		}
	}
	if id == nil {
		return nil, ErrUnauthenticated
	}
	a.mu.Lock()
	a.known[key] = id
	a.mu.Unlock()
	return id, nil
}

// AuthenticateHeader authenticates the value of an Authorization header
// ("Bearer TOKEN"). An empty header is ErrUnauthenticated when
// authentication is on.
func (a *Authenticator) AuthenticateHeader(header string) (*Identity, error) {
	if !a.Enabled() {
		return Anonymous(), nil
	}
	token, ok := BearerToken(header)
	if !ok {
		return nil, ErrUnauthenticated
	}
	return a.Authenticate(token)
}

// BearerToken returns the token of an Authorization header value
// ("Bearer TOKEN", the scheme in any case).
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// validName reports whether s can name a token.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
