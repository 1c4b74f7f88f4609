package savedinstances_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/internal/savedinstances"
)

// memSettings stands in for the engine's settings.
type memSettings struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memSettings) SaveSetting(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == nil {
		delete(s.m, key)
	} else {
		s.m[key] = value
	}
	return nil
}

func (s *memSettings) Settings(prefix string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func newRegistry(t *testing.T, configured ...executor.InstanceConfig) *executor.Registry {
	t.Helper()
	reg := executor.NewRegistry(executor.RegistryOptions{})
	t.Cleanup(reg.Close)
	for _, c := range configured {
		_, err := reg.Register(context.Background(), c)
		require.NoError(t, err)
	}
	return reg
}

// What the API registers comes back whole; an instance of the configuration
// keeps the address and token the new start gives it, with the API's other
// changes; removals stay removed, the configuration's included.
func TestRestoreBringsBackTheAPIsInstancesAndKeepsTheConfigurationsAddresses(t *testing.T) {
	s := &memSettings{m: map[string][]byte{}}
	first := newRegistry(t,
		executor.InstanceConfig{ID: "local", URL: "http://127.0.0.1:1001", Token: "start-1", Capacity: 2},
		executor.InstanceConfig{ID: "cfg", URL: "http://127.0.0.1:1002"})
	api := savedinstances.Registry{Registry: first, Settings: s}

	_, err := api.Register(context.Background(), executor.InstanceConfig{ID: "fleet", URL: "http://127.0.0.1:2001", Token: "fleet-token", Capacity: 16,
		Labels: map[string]string{"zone": "a"}})
	require.NoError(t, err)
	_, err = api.Register(context.Background(), executor.InstanceConfig{ID: "gone", URL: "http://127.0.0.1:2002"})
	require.NoError(t, err)
	require.NoError(t, api.Remove(context.Background(), "gone"))
	require.NoError(t, api.Remove(context.Background(), "cfg"))
	capacity, url := 6, "http://127.0.0.1:3001"
	_, err = api.Update(context.Background(), "local", executor.InstanceUpdate{Capacity: &capacity, URL: &url})
	require.NoError(t, err)
	_, err = api.Update(context.Background(), "fleet", executor.InstanceUpdate{Capacity: &capacity})
	require.NoError(t, err)
	_, err = api.Register(context.Background(), executor.InstanceConfig{ID: "fleet", URL: "http://127.0.0.1:2009"})
	require.Error(t, err, "a refused change saves nothing")

	// The next start: the configuration registers its instances again, the
	// local one at a new port with a new token.
	second := newRegistry(t,
		executor.InstanceConfig{ID: "local", URL: "http://127.0.0.1:1101", Token: "start-2", Capacity: 2},
		executor.InstanceConfig{ID: "cfg", URL: "http://127.0.0.1:1002"})
	var logged []string
	savedinstances.Restore(s, second, func(msg string, args ...any) { logged = append(logged, fmt.Sprint(msg, args)) })
	require.Empty(t, logged)

	ids := []string{}
	for _, in := range second.List(context.Background()) {
		ids = append(ids, in.ID)
	}
	require.Equal(t, []string{"fleet", "local"}, ids, "removed ones stay removed, the configuration's too")
	fleet, ok := second.Config("fleet")
	require.True(t, ok)
	require.Equal(t, "fleet-token", fleet.Token, "the token is saved with the instance")
	require.Equal(t, "http://127.0.0.1:2001", fleet.URL)
	require.Equal(t, 6, fleet.Capacity, "its last change is kept")
	require.Equal(t, map[string]string{"zone": "a"}, fleet.Labels)
	local, ok := second.Config("local")
	require.True(t, ok)
	require.Equal(t, "http://127.0.0.1:1101", local.URL, "the address is this start's")
	require.Equal(t, "start-2", local.Token)
	require.Equal(t, 6, local.Capacity, "the API's capacity is kept")
	in, _ := second.Get(context.Background(), "fleet")
	require.True(t, in.HasToken)
}
