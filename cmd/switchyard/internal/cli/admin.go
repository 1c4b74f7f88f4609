// The operator's verbs: `switchyard lane list|update|pause|resume`,
// `switchyard plugin list|load|unload|set` and
// `switchyard instance list|register|remove`.

package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/graph/client"
)

// LaneVerbs are the verbs of `switchyard lane`.
func LaneVerbs() []Verb {
	return []Verb{
		{"list", "list the lanes: load, limits, state, policies", laneList},
		{"update", "change a lane live: ceiling, queue cap, drop policy, pause/resume", laneUpdate},
		{"pause", "stop dispatching a lane's tasks (they are still admitted)", func(ctx context.Context, args []string, env Env) error {
			return lanePause(ctx, args, env, true)
		}},
		{"resume", "dispatch a paused lane's tasks again", func(ctx context.Context, args []string, env Env) error {
			return lanePause(ctx, args, env, false)
		}},
	}
}

// Lane runs `switchyard lane <verb>`.
func Lane(ctx context.Context, args []string, env Env) error {
	return Subverbs(ctx, "lane", LaneVerbs(), args, env)
}

func printLanes(env Env, lanes []LaneInfo, jsonOut bool) error {
	if jsonOut {
		for i := range lanes {
			if err := writeJSON(env.Stdout, &lanes[i]); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LANE\tIN FLIGHT\tCEILING\tQUEUED\tCAP\tSTATE\tWHEN FULL\tTIMEOUT\tATTEMPTS\tSELECTION\tRETRY")
	for _, l := range lanes {
		state := "running"
		if l.Paused {
			state = "paused"
		}
		if l.Pull {
			state += " (pull)" // its workers lease its tasks
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", l.Name, l.InFlight, l.MaxInFlight, l.Pending, l.MaxQueued,
			state, flagSpelling(string(l.DropPolicy)), time.Duration(l.TimeoutMs)*time.Millisecond, l.RetryPolicy.MaxAttempts,
			l.SelectionPolicy, l.RetryPolicyName)
	}
	return tw.Flush()
}

func laneList(ctx context.Context, args []string, env Env) error {
	return listCommand(ctx, args, env, "lane", func(cl *client.Client) ([]LaneInfo, error) {
		res, err := Lanes(ctx, cl)
		if err != nil {
			return nil, err
		}
		lanes := make([]LaneInfo, len(res.Lanes))
		for i := range res.Lanes {
			lanes[i] = res.Lanes[i].LaneInfo
		}
		return lanes, nil
	}, printLanes)
}

// listCommand runs "NOUN list [--json]": one query of the NOUNs, printed by
// print (a table, or one JSON object per item).
func listCommand[T any](ctx context.Context, args []string, env Env, noun string, query func(*client.Client) ([]T, error), print func(Env, []T, bool) error) error {
	fs := newFlags(noun+" list", "[--json]", env)
	var c conn
	c.register(fs, env)
	jsonOut := fs.Bool("json", false, "print one JSON object per "+noun)
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	list, err := query(cl)
	if err != nil {
		return fmt.Errorf("%ss: %w", noun, err)
	}
	return print(env, list, *jsonOut)
}

func updateLane(ctx context.Context, c *conn, name string, input map[string]any, env Env, jsonOut bool) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	res, err := UpdateLane(ctx, cl, name, input)
	if err != nil {
		return fmt.Errorf("update lane %s: %w", name, err)
	}
	if res.UpdateLane == nil {
		return &Error{Code: ExitNotFound, Err: fmt.Errorf("update lane %s: NOT_FOUND: no such lane", name)}
	}
	return printLanes(env, []LaneInfo{res.UpdateLane.LaneInfo}, jsonOut)
}

func laneUpdate(ctx context.Context, args []string, env Env) error {
	fs := newFlags("lane update", "NAME [--max-in-flight N] [--max-queued N] [--drop-policy reject|drop-oldest] [--pause|--resume] …", env)
	var c conn
	c.register(fs, env)
	maxInFlight := fs.Int("max-in-flight", 0, "the concurrency ceiling (0 dispatches nothing)")
	maxQueued := fs.Int("max-queued", 0, "the queue cap")
	drop := fs.String("drop-policy", "", "what a full queue does: reject or drop-oldest")
	pause := fs.Bool("pause", false, "pause dispatching")
	resume := fs.Bool("resume", false, "resume dispatching")
	maxDepth := fs.Int("max-depth", 0, "the deepest spawn depth admitted")
	timeout := fs.Duration("timeout", 0, "the per-attempt timeout of tasks that set none")
	maxAttempts := fs.Int("max-attempts", 0, "the lane's attempt budget (its retry policy)")
	jsonOut := fs.Bool("json", false, "print the lane as JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	in := map[string]any{}
	var dropErr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "max-in-flight":
			in["maxInFlight"] = *maxInFlight
		case "max-queued":
			in["maxQueued"] = *maxQueued
		case "drop-policy":
			in["dropPolicy"], dropErr = enumValue("--drop-policy", *drop, AllDropPolicy)
		case "pause":
			in["paused"] = *pause
		case "resume":
			in["paused"] = !*resume
		case "max-depth":
			in["maxDepth"] = *maxDepth
		case "timeout":
			in["timeoutMs"] = timeout.Milliseconds()
		case "max-attempts":
			in["retryPolicy"] = map[string]any{"maxAttempts": *maxAttempts}
		}
	})
	if dropErr != nil {
		return dropErr
	}
	if *pause && *resume {
		return Usagef("--pause and --resume together")
	}
	if len(in) == 0 {
		fs.Usage()
		return Usagef("nothing to change: give at least one of the flags")
	}
	return updateLane(ctx, &c, pos[0], in, env, *jsonOut)
}

func lanePause(ctx context.Context, args []string, env Env, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	fs := newFlags("lane "+verb, "NAME", env)
	var c conn
	c.register(fs, env)
	jsonOut := fs.Bool("json", false, "print the lane as JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	return updateLane(ctx, &c, pos[0], map[string]any{"paused": paused}, env, *jsonOut)
}

// PluginVerbs are the client verbs of `switchyard plugin` (the authoring
// tools — build, check, bench, simulate — are verbs of the same command,
// registered beside these).
func PluginVerbs() []Verb {
	return []Verb{
		{"list", "list the active policy of every slot, and the loaded plugins", pluginList},
		{"load", "load a WebAssembly policy plugin into the server (used once `plugin set` assigns it)", pluginLoad},
		{"unload", "unload a plugin no slot uses", pluginUnload},
		{"set", "make a policy (built-in or plugin) fill a slot, globally or for one lane", pluginSet},
		{"configure", "change a plugin's configuration live", pluginConfigure},
		{"enable", "re-enable a plugin whose breaker tripped", pluginEnable},
	}
}

// Plugin runs `switchyard plugin <verb>` with the client verbs.
func Plugin(ctx context.Context, args []string, env Env) error {
	return Subverbs(ctx, "plugin", PluginVerbs(), args, env)
}

func (p *PluginInfo) kind() string {
	switch {
	case p.Native:
		return "native"
	case p.Builtin:
		return "built-in"
	}
	return "wasm"
}

func pluginList(ctx context.Context, args []string, env Env) error {
	fs := newFlags("plugin list", "[--json]", env)
	var c conn
	c.register(fs, env)
	jsonOut := fs.Bool("json", false, "print {policies, plugins} as one JSON object")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	pol, err := Policies(ctx, cl)
	if err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	policies := make([]PolicyAssignment, len(pol.Policies))
	for i := range pol.Policies {
		policies[i] = pol.Policies[i].PolicyAssignment
	}
	var plugins []PluginInfo
	plug, plugErr := Plugins(ctx, cl)
	if plugErr != nil && ExitCode(plugErr) != ExitRetry {
		return fmt.Errorf("plugins: %w", plugErr)
	}
	if plug != nil {
		for i := range plug.Plugins {
			plugins = append(plugins, plug.Plugins[i].PluginInfo)
		}
	}
	if *jsonOut {
		return writeJSON(env.Stdout, map[string]any{"policies": policies, "plugins": plugins})
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tSCOPE\tPOLICY")
	for _, p := range policies {
		scope := "global"
		if p.Lane != nil {
			scope = "lane " + *p.Lane
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Slot, scope, p.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout)
	switch {
	case plugErr != nil:
		fmt.Fprintf(env.Stdout, "plugins: %v\n", plugErr)
	case len(plugins) == 0:
		fmt.Fprintln(env.Stdout, "no plugin loaded")
	default:
		tw = tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "POLICY\tSLOT\tKIND\tSTATE\tUNTIL\tIN USE\tCALLS\tFAULTS\tFALLBACKS\tHOLDS\tP50\tP99\tREASON")
		for _, p := range plugins {
			inUse := strings.Join(p.ActiveIn, ",")
			if inUse == "" {
				inUse = "-"
			}
			until := "-"
			if p.QuarantinedUntil != nil {
				until = p.QuarantinedUntil.UTC().Format(rfc3339Millis)
			}
			reason := str(p.DisabledReason)
			if reason == "" {
				reason = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.Slot, p.kind(), p.State, until, inUse,
				p.Calls, p.Faults, p.Fallbacks, p.Holds, micros(p.P50Us), micros(p.P99Us), clip(reason, 60))
		}
		return tw.Flush()
	}
	return nil
}

// rfc3339Millis is RFC 3339 to the millisecond, as the log prints times: a
// quarantine's end cut to the second would read as before the real end.
const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"

// micros prints a decision latency in microseconds, or "-" for a plugin no
// decision of which has been timed yet (null percentiles).
func micros(us *float64) string {
	if us == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", *us)
}

func pluginLoad(ctx context.Context, args []string, env Env) error {
	fs := newFlags("plugin load", "NAME FILE.wasm [--config JSON|@file]", env)
	var c conn
	c.register(fs, env)
	config := fs.String("config", "", "the plugin's configuration: a JSON document, or @file to read it from a file")
	jsonOut := fs.Bool("json", false, "print the plugin as JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(pos[1])
	if err != nil {
		return Usagef("read module: %v", err)
	}
	in := map[string]any{"name": pos[0], "wasmBase64": base64.StdEncoding.EncodeToString(wasm)}
	if *config != "" {
		v, err := readConfig(*config)
		if err != nil {
			return err
		}
		in["config"] = v
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	res, err := LoadPlugin(ctx, cl, in)
	if err != nil {
		return fmt.Errorf("load %s: %w", pos[0], err)
	}
	if res.LoadPlugin == nil {
		return fmt.Errorf("load %s: no plugin in the answer", pos[0])
	}
	p := &res.LoadPlugin.PluginInfo
	if *jsonOut {
		return writeJSON(env.Stdout, res.LoadPlugin) // the plugin's fields, and replaced
	}
	fmt.Fprintf(env.Stdout, "loaded %s (slot %s, %d bytes, sha256 %.12s); assign it with: switchyard plugin set %s %s\n",
		p.Name, p.Slot, p.Size, str(p.Sha256), strings.ToLower(string(p.Slot)), p.Name)
	if r := str(res.LoadPlugin.Replaced); r != "" {
		fmt.Fprintf(env.Stdout, "it replaced %s\n", r)
	}
	return nil
}

// readConfig reads a JSON document given inline or as @file.
func readConfig(arg string) (any, error) {
	doc := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if doc, err = os.ReadFile(name); err != nil {
			return nil, Usagef("--config: %v", err)
		}
	}
	if at, ok := invalidUTF8(doc); !ok {
		return nil, Usagef("--config: not valid UTF-8 at byte %d (strings must be UTF-8)", at)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, Usagef("--config: not JSON: %v", err)
	}
	return v, nil
}

func pluginConfigure(ctx context.Context, args []string, env Env) error {
	fs := newFlags("plugin configure", "NAME --config JSON|@file|null", env)
	var c conn
	c.register(fs, env)
	config := fs.String("config", "", "the new configuration: a JSON document, or @file; null for none (the plugin as loaded without one)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *config == "" {
		return Usagef("--config is required")
	}
	v, err := readConfig(*config)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	doc, err := json.Marshal(v)
	if err != nil {
		return Usagef("--config: %v", err)
	}
	var cfg *json.RawMessage // --config null: no configuration
	if v != nil {
		raw := json.RawMessage(doc)
		cfg = &raw
	}
	if _, err := ConfigurePlugin(ctx, cl, pos[0], cfg); err != nil {
		return fmt.Errorf("configure %s: %w", pos[0], err)
	}
	if v == nil {
		fmt.Fprintf(env.Stdout, "configured %s: no configuration (as loaded without one)\n", pos[0])
		return nil
	}
	fmt.Fprintf(env.Stdout, "configured %s\n", pos[0])
	return nil
}

func pluginEnable(ctx context.Context, args []string, env Env) error {
	fs := newFlags("plugin enable", "NAME [--force]", env)
	var c conn
	c.register(fs, env)
	force := fs.Bool("force", false, "enable a DISABLED plugin even though its smoke decision faults under its configuration (it will fault on its decisions)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var f *bool
	if *force {
		f = force
	}
	res, err := EnablePlugin(ctx, cl, pos[0], f)
	if err != nil {
		return fmt.Errorf("enable %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "enabled %s: %s\n", pos[0], res.EnablePlugin.State)
	return nil
}

func pluginUnload(ctx context.Context, args []string, env Env) error {
	return onTarget(args, env, "plugin", "unload", "NAME", func(cl *client.Client, name string) (string, error) {
		_, err := UnloadPlugin(ctx, cl, name)
		return "unloaded " + name, err
	})
}

// onTarget runs `switchyard <noun> <verb> <operand>`: a verb whose one
// argument names what it acts on and whose only flags are the connection's.
// act asks the server and returns the line to print; its error is reported
// as "<verb> <target>: …".
func onTarget(args []string, env Env, noun, verb, operand string, act func(cl *client.Client, target string) (string, error)) error {
	fs := newFlags(noun+" "+verb, operand, env)
	var c conn
	c.register(fs, env)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	line, err := act(cl, pos[0])
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, pos[0], err)
	}
	fmt.Fprintln(env.Stdout, line)
	return nil
}

func pluginSet(ctx context.Context, args []string, env Env) error {
	fs := newFlags("plugin set", "SLOT [NAME] [--lane LANE] [--default]   (SLOT: selection, fairness or retry; no NAME with --lane: back to the global policy; --default without --lane: back to the server's default)", env)
	var c conn
	c.register(fs, env)
	lane := fs.String("lane", "", "set this lane's own policy (selection and retry only)")
	def := fs.Bool("default", false, "drop the choice instead of naming a policy: the slot has the server's default again (the WebAssembly built-in, or the native one under --native-policies, at every start), or with --lane the lane follows the global policy")
	jsonOut := fs.Bool("json", false, "print the assignments as JSON")
	pos, err := parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	slot, err := enumValue("SLOT", pos[0], AllPolicySlot)
	if err != nil {
		return err
	}
	in := map[string]any{"slot": slot}
	if *lane != "" {
		in["lane"] = *lane
	}
	switch {
	case len(pos) == 2 && *def:
		return Usagef("name a policy or give --default, not both")
	case len(pos) == 2:
		in["name"] = pos[1]
	case *lane == "" && !*def:
		return Usagef("name the policy, or give --default to go back to the server's default (--lane LANE: to make a lane use the global policy again)")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	res, err := SetPolicy(ctx, cl, in)
	if err != nil {
		return fmt.Errorf("set %s: %w", pos[0], err)
	}
	assigned := make([]PolicyAssignment, len(res.SetPolicy))
	for i := range res.SetPolicy {
		assigned[i] = res.SetPolicy[i].PolicyAssignment
	}
	if *jsonOut {
		return writeJSON(env.Stdout, assigned)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tSCOPE\tPOLICY")
	for _, p := range assigned {
		scope := "global"
		if p.Lane != nil {
			scope = "lane " + *p.Lane
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Slot, scope, p.Name)
	}
	return tw.Flush()
}

// InstanceVerbs are the verbs of `switchyard instance` that talk to a
// server (the command itself, without a verb, runs the built-in browser).
func InstanceVerbs() []Verb {
	return []Verb{
		{"list", "list the server's browser instances: health, latency, load", instanceList},
		{"register", "add a browser instance (a PinchTab server or `switchyard instance`) to the server", instanceRegister},
		{"remove", "forget an instance: tab-less work is placed again; its sessions lose their tabs (SESSION events)", instanceRemove},
	}
}

func printInstances(env Env, list []InstanceInfo, jsonOut bool) error {
	if jsonOut {
		for i := range list {
			if err := writeJSON(env.Stdout, &list[i]); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tKIND\tHEALTH\tLATENCY\tIN FLIGHT\tCAPACITY\tTABS\tURL\tLAST ERROR")
	for _, in := range list {
		capacity := "∞"
		if in.Capacity > 0 {
			capacity = fmt.Sprint(in.Capacity)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fms\t%d\t%s\t%d\t%s\t%s\n", in.Id, strings.ToLower(string(in.Kind)), in.Health, in.LatencyMs,
			in.InFlight, capacity, in.Tabs, in.Url, clip(str(in.LastError), 60))
	}
	return tw.Flush()
}

func instanceList(ctx context.Context, args []string, env Env) error {
	return listCommand(ctx, args, env, "instance", func(cl *client.Client) ([]InstanceInfo, error) {
		res, err := Instances(ctx, cl)
		if err != nil {
			return nil, err
		}
		list := make([]InstanceInfo, len(res.Instances))
		for i := range res.Instances {
			list[i] = res.Instances[i].InstanceInfo
		}
		return list, nil
	}, printInstances)
}

func instanceRegister(ctx context.Context, args []string, env Env) error {
	fs := newFlags("instance register", "ID URL [--kind instance|pinchtab|chat] [--capacity N] [--label k=v] [--token-file F]", env)
	var c conn
	c.register(fs, env)
	kind := fs.String("kind", "instance", "instance (one browser), pinchtab (a PinchTab server) or chat")
	capacity := fs.Int("capacity", 0, "concurrent attempts it accepts (0: unlimited)")
	tokenFile := fs.String("token-file", "", "a file holding the instance's bearer token (kept off the command line)")
	var ls multi
	fs.Var(&ls, "label", "a key=value label (repeatable)")
	jsonOut := fs.Bool("json", false, "print the instance as JSON")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	instanceKind, err := enumValue("--kind", *kind, AllInstanceKind)
	if err != nil {
		return err
	}
	in := map[string]any{"id": pos[0], "url": pos[1], "kind": instanceKind, "capacity": *capacity}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return Usagef("--token-file: %v", err)
		}
		if at, ok := invalidUTF8(b); !ok {
			return Usagef("--token-file %s: not valid UTF-8 at byte %d", *tokenFile, at)
		}
		in["token"] = strings.TrimSpace(string(b))
	}
	if len(ls) > 0 {
		labelInputs, err := labels(ls)
		if err != nil {
			return err
		}
		in["labels"] = labelInputs
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	res, err := RegisterInstance(ctx, cl, in)
	if err != nil {
		return fmt.Errorf("register %s: %w", pos[0], err)
	}
	if res.RegisterInstance == nil {
		return fmt.Errorf("register %s: no instance in the answer", pos[0])
	}
	return printInstances(env, []InstanceInfo{res.RegisterInstance.InstanceInfo}, *jsonOut)
}

func instanceRemove(ctx context.Context, args []string, env Env) error {
	return onTarget(args, env, "instance", "remove", "ID", func(cl *client.Client, id string) (string, error) {
		_, err := RemoveInstance(ctx, cl, id)
		return "removed " + id, err
	})
}

// invalidUTF8 reports whether b is UTF-8, and if not, the offset of the
// first byte that is not: files are refused rather than sent with their
// bytes replaced by U+FFFD.
func invalidUTF8(b []byte) (int, bool) {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i, false
		}
		i += n
	}
	return 0, true
}
