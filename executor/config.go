// What an instance is, as configured: where it listens, how to authenticate,
// which protocol flavour it speaks and how much work it takes.

package executor

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
)

// Kind is the flavour of a browser instance.
type Kind string

// Instance kinds.
const (
	// KindInstance is a single browser instance: Switchyard's built-in one or a
	// PinchTab bridge. Tabs: GET /tabs; opening one: POST /tab.
	KindInstance Kind = "instance"
	// KindServer is a PinchTab server in front of several browsers. Tabs:
	// GET /instances/tabs; opening one: POST /instances/{id}/tabs/open.
	KindServer Kind = "pinchtab"
	// KindChat is a chat-style instance that takes instructions: POST /chat,
	// answered with Server-Sent Events.
	KindChat Kind = "chat"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindInstance || k == KindServer || k == KindChat }

// browser reports whether instances of kind k have tabs.
func (k Kind) browser() bool { return k == KindInstance || k == KindServer }

// ParseKind returns the kind named s ("instance", "pinchtab", "chat"; "" means
// "instance").
func ParseKind(s string) (Kind, error) {
	if s == "" {
		return KindInstance, nil
	}
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("unknown instance kind %q (want instance, pinchtab or chat)", s)
	}
	return k, nil
}

// Dialect is the body a chat instance's POST /chat takes.
type Dialect string

// Chat dialects.
const (
	// DialectGeneric sends {"instruction","tabId"}: Switchyard's own.
	DialectGeneric Dialect = ""
	// DialectBrowserOS sends BrowserOS Core's body, the contract of the
	// BrowserOS Server Edition task queue: {"conversationId" (one UUID per
	// task), "message" (the instruction), "isScheduledTask": true,
	// "mode": "agent", "supportsImages": false, "provider": "browseros"},
	// with the task's labels "llm.<field>" merged over it.
	DialectBrowserOS Dialect = "browseros"
)

// ParseDialect returns the dialect named s ("" or "generic", "browseros").
func ParseDialect(s string) (Dialect, error) {
	switch s {
	case "", "generic":
		return DialectGeneric, nil
	case string(DialectBrowserOS):
		return DialectBrowserOS, nil
	}
	return "", fmt.Errorf("unknown chat dialect %q (want generic or browseros)", s)
}

// InstanceConfig describes an instance: from the config file, or registered at
// run time. Its String method hides the token, so that logging a config cannot
// leak it.
type InstanceConfig struct {
	ID       string            // unique, stable: tasks and sessions name it
	URL      string            // base URL of its HTTP API
	Token    string            // bearer token; "" sends none
	Kind     Kind              // "" means KindInstance
	Capacity int               // concurrent attempts it accepts; 0 means unlimited (for chat: DefaultChatCapacity)
	Labels   map[string]string // free-form
	Dialect  Dialect           // the /chat body of a chat instance; "" is the generic one
}

// DefaultChatCapacity is a chat instance's capacity when it gives none: one
// conversation at a time, as BrowserOS runs them.
const DefaultChatCapacity = 1

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// Validate checks the config and fills in defaults. Its errors name the field.
func (c *InstanceConfig) Validate() error {
	var errs []error
	if !idPattern.MatchString(c.ID) {
		errs = append(errs, fmt.Errorf("id: %q must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", c.ID))
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("url: %q must be an absolute http(s) URL", c.URL))
	}
	if c.Kind == "" {
		c.Kind = KindInstance
	}
	if !c.Kind.Valid() {
		errs = append(errs, fmt.Errorf("kind: unknown kind %q (want instance, pinchtab or chat)", c.Kind))
	}
	if c.Capacity < 0 {
		errs = append(errs, fmt.Errorf("capacity: %d must not be negative", c.Capacity))
	}
	if c.Capacity == 0 && c.Kind == KindChat {
		c.Capacity = DefaultChatCapacity
	}
	if _, err := ParseDialect(string(c.Dialect)); err != nil {
		errs = append(errs, fmt.Errorf("dialect: %w", err))
	} else if c.Dialect != DialectGeneric && c.Kind != KindChat {
		errs = append(errs, fmt.Errorf("dialect: %q is for chat instances, not %s", c.Dialect, c.Kind))
	}
	return errors.Join(errs...)
}

// String describes the config without its token.
func (c InstanceConfig) String() string {
	tok := "none"
	if c.Token != "" {
		tok = "[redacted]"
	}
	d := ""
	if c.Dialect != DialectGeneric {
		d = " dialect=" + string(c.Dialect)
	}
	return fmt.Sprintf("instance{id=%s url=%s kind=%s%s capacity=%d token=%s labels=%v}", c.ID, c.URL, c.Kind, d, c.Capacity, tok, c.Labels)
}

// GoString is String, so that %#v cannot leak the token either.
func (c InstanceConfig) GoString() string { return c.String() }

func (c InstanceConfig) clone() InstanceConfig {
	c.Labels = maps.Clone(c.Labels)
	return c
}

// InstanceUpdate changes some fields of a registered instance; nil fields stay
// as they are.
type InstanceUpdate struct {
	URL      *string
	Token    *string
	Kind     *Kind
	Capacity *int
	Labels   *map[string]string // replaces all labels
	Dialect  *Dialect
}
