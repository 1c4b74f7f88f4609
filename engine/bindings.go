package engine

import (
	"encoding/json"
	"strings"
)

// A session's binding (the instance and tab its tasks run in) is kept as a
// setting, "binding/<sessionKey>", written in the same commit as the attempt
// that made it: after a restart the session's next task goes back to its own
// tab, or, when that tab or its instance is gone, fails with SESSION_LOST.
// It never starts over silently in a new tab.
const bindingSettingPrefix = "binding/"

// storedBinding is a binding as a setting holds it.
type storedBinding struct {
	Instance string `json:"instance"`
	Tab      string `json:"tab"`
	Lost     bool   `json:"lost,omitempty"`
}

// setBindingLocked binds a session and records the binding when it changed.
func (c *core) setBindingLocked(key string, b binding) {
	if old, ok := c.bindings[key]; ok && old == b {
		return
	}
	c.bindings[key] = b
	v, err := json.Marshal(storedBinding{Instance: b.instance, Tab: b.tab, Lost: b.lost})
	if err != nil {
		return // cannot happen: strings and a bool
	}
	c.putSettingLocked(bindingSettingPrefix+key, v)
}

// dropBindingLocked forgets a session's binding, stored one included.
func (c *core) dropBindingLocked(key string) {
	if _, ok := c.bindings[key]; !ok {
		return
	}
	delete(c.bindings, key)
	c.putSettingLocked(bindingSettingPrefix+key, nil)
}

// restoreBindingsLocked loads the stored bindings.
func (e *Engine) restoreBindingsLocked() {
	for k, v := range e.settings {
		key, ok := strings.CutPrefix(k, bindingSettingPrefix)
		if !ok || key == "" {
			continue
		}
		var sb storedBinding
		if err := json.Unmarshal(v, &sb); err != nil || sb.Tab == "" {
			e.log.Warn("ignoring a stored session binding that does not parse", "key", k, "error", err)
			continue
		}
		e.bindings[key] = binding{instance: sb.Instance, tab: sb.Tab, lost: sb.Lost}
	}
}
