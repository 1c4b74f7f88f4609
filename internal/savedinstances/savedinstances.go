// Package savedinstances keeps the browser instances registered, changed or
// removed through the API as engine settings ("instance/<id>"), so that they
// come back when a node restarts on a durable store (SQLite or PostgreSQL)
// and whichever node of a cluster leads next dispatches to the same fleet.
//
// An instance's setting holds its whole configuration, token included: the
// token stays in the store, as the rest of the configuration does, and never
// reaches an API answer (executor.Instance says only whether there is one)
// or a log line. A removed instance leaves a tombstone, since it may come
// from the configuration, which registers it again at every start.
//
// The instances the configuration registers at start (and the built-in local
// one, whose port and token are new at every start) keep the address and
// token it gives them: of a change made to one of them through the API, only
// its kind, dialect, capacity and labels come back, and a removal keeps it
// removed.
package savedinstances

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/executor"
)

// Prefix starts the key of every instance's setting.
const Prefix = "instance/"

// Settings is where the instances are saved (*engine.Engine).
type Settings interface {
	SaveSetting(ctx context.Context, key string, value []byte) error
	Settings(prefix string) map[string][]byte
}

// stored is an instance's setting.
type stored struct {
	Config  *executor.InstanceConfig `json:"config,omitempty"`
	Removed bool                     `json:"removed,omitempty"`
}

// Save records instance id's registration in reg as it is now, or its
// removal when reg no longer has it.
func Save(ctx context.Context, s Settings, reg *executor.Registry, id string) error {
	var st stored
	if cfg, ok := reg.Config(id); ok {
		st.Config = &cfg
	} else {
		st.Removed = true
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("instance %s: %w", id, err)
	}
	if err := s.SaveSetting(ctx, Prefix+id, b); err != nil {
		return fmt.Errorf("the change to instance %s was made but not saved: %w", id, err)
	}
	return nil
}

// Restore makes reg match the saved instances: it registers the ones saved,
// removes the ones saved as removed and applies the saved kind, dialect,
// capacity and labels to the ones already registered (from the configuration). Problems
// are logged with logf, which never sees a token.
func Restore(s Settings, reg *executor.Registry, logf func(msg string, args ...any)) {
	ctx := context.Background() // reg is this node's own registry: nothing waits on another node
	for key, b := range s.Settings(Prefix) {
		id := strings.TrimPrefix(key, Prefix)
		var st stored
		if err := json.Unmarshal(b, &st); err != nil {
			logf("an unreadable saved instance", "instance", id, "error", err)
			continue
		}
		_, have := reg.Config(id)
		var err error
		switch {
		case st.Removed && have:
			err = reg.Remove(ctx, id)
		case st.Removed, st.Config == nil:
		case have:
			c := st.Config
			_, err = reg.Update(ctx, id, executor.InstanceUpdate{Kind: &c.Kind, Capacity: &c.Capacity, Labels: &c.Labels,
				Dialect: &c.Dialect})
		default:
			_, err = reg.Register(ctx, *st.Config)
		}
		if err != nil {
			logf("could not restore a saved instance", "instance", id, "error", err)
		}
	}
}

// Registry is an instance registry whose changes through it are saved: the
// registry the API serves on a single node. A change that was made is saved
// even if the caller's context ends meanwhile (the save does not inherit its
// cancellation), so that the registry and the store agree.
type Registry struct {
	*executor.Registry
	Settings Settings
}

// Register adds an instance and saves it.
func (r Registry) Register(ctx context.Context, cfg executor.InstanceConfig) (executor.Instance, error) {
	in, err := r.Registry.Register(ctx, cfg)
	if err == nil {
		err = Save(context.WithoutCancel(ctx), r.Settings, r.Registry, in.ID)
	}
	return in, err
}

// Update changes an instance and saves the change.
func (r Registry) Update(ctx context.Context, id string, u executor.InstanceUpdate) (executor.Instance, error) {
	in, err := r.Registry.Update(ctx, id, u)
	if err == nil {
		err = Save(context.WithoutCancel(ctx), r.Settings, r.Registry, in.ID)
	}
	return in, err
}

// Remove removes an instance and saves its removal.
func (r Registry) Remove(ctx context.Context, id string) error {
	err := r.Registry.Remove(ctx, id)
	if err == nil {
		err = Save(context.WithoutCancel(ctx), r.Settings, r.Registry, id)
	}
	return err
}
