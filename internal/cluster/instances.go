package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/engine/executor"
)

// The instances registered, changed or removed through the API are kept as
// engine settings ("instance/<id>"), so that whichever node leads next
// dispatches to the same fleet. A removed instance leaves a tombstone: it
// may come from the nodes' configuration, which every leader registers at
// start.

const instancePrefix = "instance/"

// storedInstance is an instance's setting.
type storedInstance struct {
	Config  *executor.InstanceConfig `json:"config,omitempty"`
	Removed bool                     `json:"removed,omitempty"`
}

// saveInstance records an instance's registration as it is now (or its
// removal).
func (l *leader) saveInstance(ctx context.Context, id string) error {
	var s storedInstance
	if cfg, ok := l.reg.Config(id); ok {
		s.Config = &cfg
	} else {
		s.Removed = true
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := l.eng.SaveSetting(ctx, instancePrefix+id, b); err != nil {
		return fmt.Errorf("the change to instance %s was made but not saved for the next leader: %w", id, err)
	}
	return nil
}

// restoreInstances makes the registry match the instances saved by earlier
// leaders.
func (l *leader) restoreInstances(logf func(msg string, args ...any)) {
	if l.reg == nil {
		return
	}
	for key, b := range l.eng.Settings(instancePrefix) {
		id := strings.TrimPrefix(key, instancePrefix)
		var s storedInstance
		if err := json.Unmarshal(b, &s); err != nil {
			logf("an unreadable saved instance", "instance", id, "error", err)
			continue
		}
		_, have := l.reg.Config(id)
		var err error
		switch {
		case s.Removed && have:
			err = l.reg.Remove(id)
		case s.Removed:
		case have:
			c := s.Config
			_, err = l.reg.Update(id, executor.InstanceUpdate{URL: &c.URL, Token: &c.Token, Kind: &c.Kind,
				Capacity: &c.Capacity, Labels: &c.Labels})
		default:
			_, err = l.reg.Register(*s.Config)
		}
		if err != nil {
			logf("could not restore a saved instance", "instance", id, "error", err)
		}
	}
}
