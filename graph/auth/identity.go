// Roles and identities: who a request acts as, carried in its context.

package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Role is what a token may do.
type Role uint8

// The roles. See Operations for what each may run.
const (
	// RoleAdmin may do everything.
	RoleAdmin Role = iota + 1
	// RoleOperator runs the fleet: lanes, agents' settings, instances,
	// schedules, policies, draining; cancels, resets and retries any task;
	// reads everything. It cannot load or unload plugin code.
	RoleOperator
	// RoleAgent is bound to one agentId: it submits as that agent only, and
	// reads, follows, cancels, retries and schedules only that agent's work.
	RoleAgent
	// RoleReader reads everything and changes nothing.
	RoleReader
	// RoleWorker is an external worker of pull lanes: it leases, renews,
	// completes, fails and releases the tasks of its lanes (Lanes) and
	// does nothing else: it reads only the tasks it leases and, through
	// them, what their work needs (graph/resolvers enforces which fields).
	RoleWorker
)

var roleNames = [...]string{RoleAdmin: "admin", RoleOperator: "operator", RoleAgent: "agent", RoleReader: "reader", RoleWorker: "worker"}

// Roles lists every role, most powerful first.
func Roles() []Role { return []Role{RoleAdmin, RoleOperator, RoleAgent, RoleReader, RoleWorker} }

// String returns the role's name as the configuration writes it.
func (r Role) String() string {
	if int(r) < len(roleNames) && roleNames[r] != "" {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for r, name := range roleNames {
		if name != "" && name == s {
			return Role(r), nil
		}
	}
	return 0, fmt.Errorf("%q is not a role (admin, operator, agent, reader or worker)", s)
}

// RoleSet is a set of roles.
type RoleSet uint8

// SetOf returns the set of the given roles.
func SetOf(roles ...Role) RoleSet {
	var s RoleSet
	for _, r := range roles {
		s |= 1 << r
	}
	return s
}

// Has reports whether r is in the set.
func (s RoleSet) Has(r Role) bool { return r < 8 && s&(1<<r) != 0 }

// String lists the roles of the set.
func (s RoleSet) String() string {
	var names []string
	for _, r := range Roles() {
		if s.Has(r) {
			names = append(names, r.String())
		}
	}
	return strings.Join(names, ", ")
}

// Identity is who a request acts as.
type Identity struct {
	// Name is the token's name from the configuration ("anonymous" when
	// authentication is off). It is what the audit log records; the token
	// itself is never recorded.
	Name string
	Role Role
	// AgentID is the agent a RoleAgent identity is bound to.
	AgentID string
	// Lanes are the pull lanes a RoleWorker identity may lease from.
	Lanes []string
}

// MayPull reports whether the identity may lease from (and end leases of)
// the pull lane named lane: a worker from its own lanes, an admin or
// operator from every lane.
func (id *Identity) MayPull(lane string) bool {
	switch id.Role {
	case RoleAdmin, RoleOperator:
		return true
	case RoleWorker:
		return slices.Contains(id.Lanes, lane)
	}
	return false
}

// Anonymous returns the identity of every request when authentication is
// off: everything is allowed.
func Anonymous() *Identity { return &Identity{Name: "anonymous", Role: RoleAdmin} }

// Agent returns the agent the identity is restricted to, or "" when it may
// act on every agent's work.
func (id *Identity) Agent() string {
	if id.Role == RoleAgent {
		return id.AgentID
	}
	return ""
}

// String describes the identity for logs and messages.
func (id *Identity) String() string {
	if id.Role == RoleAgent {
		return fmt.Sprintf("%s (agent %s)", id.Name, id.AgentID)
	}
	if id.Role == RoleWorker {
		return fmt.Sprintf("%s (worker of %s)", id.Name, strings.Join(id.Lanes, ", "))
	}
	return fmt.Sprintf("%s (%s)", id.Name, id.Role)
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity of ctx, or nil when it carries none.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}
