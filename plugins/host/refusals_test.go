package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/host"
)

// A module whose configure faults (here it loops until it runs out of
// fuel) with no configuration given is refused as the module's fault: an
// error that is ErrInvalid and no *ConfigError, naming configure and the
// setup budget it ran out of, since there is no configuration to blame.
// Given a configuration, it is refused so too when a fresh instance's
// configure faults under none: the configuration is not at fault either.
func TestAConfigureThatFaultsUnderNoConfigurationIsTheModules(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	ctx := context.Background()
	for _, config := range [][]byte{nil, []byte(`{}`), []byte(`{"mode": "fast"}`)} {
		_, err := rt.Load(ctx, "cspin", plugintest.ConfigureSpins(), config)
		require.ErrorIs(t, err, host.ErrInvalid)
		var ce *host.ConfigError
		require.False(t, errors.As(err, &ce), "config %s: the configuration is not at fault: %v", config, err)
		require.EqualError(t, err, `load plugin "cspin": invalid plugin: configure faulted under no configuration: fuel: ran out of fuel (20000000 units of SetupFuel)`, "config %s", config)
	}
}

// A module whose configure faults only under the configuration given (it
// loops until it runs out of fuel when given a document, and accepts none)
// is refused for the configuration, with an error that says configure
// faulted, of what kind and over which budget — not that the module
// refused the document, which it never answered. The same holds for a
// configuration given to the plugin once loaded, tried (Trial) or applied
// (Configure), and the plugin keeps deciding under none.
func TestAConfigureThatFaultsUnderAConfigurationSaysItFaulted(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	ctx := context.Background()
	const faulted = "configure faulted under this configuration: fuel: ran out of fuel (20000000 units of SetupFuel)"
	_, err := rt.Load(ctx, "cspin", plugintest.ConfigureSpinsOnADocument(), []byte(`{"mode": "fast"}`))
	var ce *host.ConfigError
	require.ErrorAs(t, err, &ce, "the configuration is at fault: %v", err)
	var cf *host.ConfigureFault
	require.ErrorAs(t, err, &cf)
	require.Equal(t, host.FaultBudget, cf.Kind)
	require.EqualError(t, err, `load plugin "cspin": invalid plugin: `+faulted)

	p, err := rt.Load(ctx, "cspin", plugintest.ConfigureSpinsOnADocument(), nil)
	require.NoError(t, err, "under no configuration the module loads")
	err = p.Trial(ctx, []byte(`{"mode": "fast"}`))
	require.ErrorAs(t, err, &cf)
	require.EqualError(t, err, `try a configuration of plugin "cspin": invalid plugin: `+faulted)
	err = p.Configure(ctx, []byte(`{"mode": "fast"}`))
	require.ErrorAs(t, err, &cf)
	require.EqualError(t, err, `configure plugin "cspin": invalid plugin: `+faulted)
	require.Empty(t, p.Config(), "the configuration is unchanged")
}

// A version 1 module that answers a hold, which only version 2 has, is
// refused at load with an error that says so, not merely that its
// fairness_pick returned an error.
func TestAHoldFromAVersion1ModuleIsRefusedAsSuch(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	_, err := rt.Load(context.Background(), "v1hold", plugintest.HoldAlwaysV1(), nil)
	require.ErrorIs(t, err, host.ErrInvalid)
	require.ErrorContains(t, err, "smoke decision: refused: fairness_pick returned a hold (-1073741824), which ABI version 1 does not have: a module that holds declares abi_version 2")
	_, err = rt.Load(context.Background(), "v2hold", plugintest.HoldAlways(), nil)
	require.NoError(t, err, "version 2 holds")
}

// A module with no configure export refuses a configuration, which is the
// configuration's fault, as before.
func TestAConfigurationAModuleWithoutConfigureRefusesIsTheConfigurations(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	_, err := rt.Load(context.Background(), "plain", plugintest.RetryAnswer(2), []byte(`{"mode": "fast"}`))
	var ce *host.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, err.Error(), "the plugin takes no configuration")
}

// A module that exports a name the host adds to every module (its fuel
// and depth globals, its start function) is refused with an error that
// says the name is reserved, not with the compiler's duplicate export.
func TestAnExportUnderAReservedNameIsRefusedAsSuch(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	for _, name := range []string{"switchyard_fuel", "switchyard_depth", "switchyard_start"} {
		_, err := rt.Load(context.Background(), "reserved", plugintest.Exporting(name), nil)
		require.ErrorIs(t, err, host.ErrInvalid)
		require.EqualError(t, err, `load plugin "reserved": invalid plugin: the module exports "`+name+`", a name reserved by the host, which adds its own switchyard_fuel, switchyard_depth and switchyard_start exports to every module: rename it`)
	}
	_, err := rt.Load(context.Background(), "fine", plugintest.Exporting("switchyard_other"), nil)
	require.NoError(t, err, "other names are the module's")
}

// A module whose policy_flags sets a bit its ABI version does not define
// is refused at load naming the bit, not loaded with the bit ignored.
func TestPolicyFlagsItsVersionDoesNotDefineAreRefused(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	for _, c := range []struct {
		version, flags byte
		want           string
	}{
		{1, 2, "policy_flags sets bit 1 (NAMES), which ABI version 1 does not define: a module that asks for them declares abi_version 2"},
		{1, 4 | 8, "policy_flags sets bit 2 (HOLDS), bit 3 (DETAILS), which ABI version 1 does not define: a module that asks for them declares abi_version 2"},
		{1, 1 | 32, "policy_flags sets bit 5, which ABI version 1 does not define: no ABI version this host speaks defines them; clear them"},
		{2, 16, "policy_flags sets bit 4, which ABI version 2 does not define: no ABI version this host speaks defines them; clear them"},
	} {
		_, err := rt.Load(context.Background(), "flagged", plugintest.Flagged(c.version, c.flags), nil)
		require.ErrorIs(t, err, host.ErrInvalid)
		require.EqualError(t, err, `load plugin "flagged": invalid plugin: `+c.want)
	}
	for _, ok := range []struct{ version, flags byte }{{1, 0}, {1, 1}, {2, 1 | 2 | 4 | 8}} {
		_, err := rt.Load(context.Background(), "flagged", plugintest.Flagged(ok.version, ok.flags), nil)
		require.NoError(t, err, "version %d defines flags %b", ok.version, ok.flags)
	}
}

// A configure call the host stops at its deadline is left out of
// SetupFuelMax, as a stopped decision is out of FuelMax: its emptied tank
// (here, all of a large SetupFuel) was not burnt, and what it did burn
// depends on the machine.
func TestAConfigureStoppedAtItsDeadlineIsLeftOutOfSetupFuelMax(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{SetupFuel: 1 << 50, Deadline: 10 * time.Millisecond}) // a setup bound of 1 s
	ctx := context.Background()
	p, err := rt.Load(ctx, "cspin", plugintest.ConfigureSpinsOnADocument(), nil)
	require.NoError(t, err)
	before := p.Stats().SetupFuelMax
	require.Positive(t, before, "the load's setup calls count")
	err = p.Trial(ctx, []byte(`{"mode": "fast"}`)) // spins until the setup bound stops it
	var cf *host.ConfigureFault
	require.ErrorAs(t, err, &cf)
	require.Equal(t, before, p.Stats().SetupFuelMax, "the stopped configure is left out")
}
