package engine

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
)

// Settings are small named values persisted with the engine's state: the
// engine keeps its own live changes there (agent weights, policy choices) and
// the components around it keep theirs (schedules, loaded plugins). They are
// loaded at start and written in the same commits as everything else.

// SaveSetting stores a setting (a nil value deletes it). With a durable
// store it returns once the setting is committed.
func (e *Engine) SaveSetting(ctx context.Context, key string, value []byte) error {
	if key == "" {
		return invalid("key", "is required")
	}
	pb, err := e.apply(true, func(c *core) error {
		if c.closed {
			return &Error{Code: CodeUnavailable, Message: "the engine is shut down"}
		}
		c.putSettingLocked(key, value)
		return nil
	})
	if err != nil || !e.durable {
		return err
	}
	e.commitSoon()
	if ended, err := e.waitCommitted(ctx, pb); !ended {
		return &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "the setting was not confirmed durable"}
	}
	return nil
}

// Setting returns a stored setting.
func (e *Engine) Setting(key string) (v []byte, ok bool) {
	e.view(func(c *core) { v, ok = c.settings[key] })
	return v, ok
}

// Settings returns the settings whose keys start with prefix.
func (e *Engine) Settings(prefix string) map[string][]byte {
	var out map[string][]byte
	e.view(func(c *core) { out = c.settingsLocked(prefix) })
	return out
}

// settingsLocked is Settings on the core.
func (c *core) settingsLocked(prefix string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range c.settings {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// putSettingLocked records a setting the engine itself changed.
func (c *core) putSettingLocked(key string, value []byte) {
	if value == nil {
		delete(c.settings, key)
	} else {
		c.settings[key] = value
	}
	c.cur.settings = append(c.cur.settings, Setting{Key: key, Value: value})
}

// restoreSettingsLocked loads the stored settings and applies the engine's
// own (agent weights and ceilings, sessions' bindings and cut-offs).
func (e *Engine) restoreSettingsLocked(stored map[string][]byte) {
	e.settings = maps.Clone(stored)
	if e.settings == nil {
		e.settings = map[string][]byte{}
	}
	for k, v := range e.settings {
		id, ok := strings.CutPrefix(k, "agent/")
		if !ok {
			continue
		}
		var c AgentConfig
		if err := json.Unmarshal(v, &c); err != nil {
			e.log.Warn("ignoring a stored agent setting that does not parse", "key", k, "error", err)
			continue
		}
		if e.cfg.Agents == nil {
			e.cfg.Agents = map[string]AgentConfig{}
		}
		e.cfg.Agents[id] = c
	}
	e.restoreBindingsLocked()
	e.restoreCutoffsLocked()
}
