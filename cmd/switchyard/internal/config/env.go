// Environment overrides: every scalar key of the configuration, and every
// list of scalars (api.allowedOrigins: comma-separated), has a SWITCHYARD_
// variable, derived from its YAML path, so that the list of variables
// cannot drift from the file's keys. Lists and maps of objects (instances,
// auth.tokens, …) are the file's only: their variable is named in a warning
// that says so.

package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard/switchyard/engine"
)

// EnvPrefix starts every variable.
const EnvPrefix = "SWITCHYARD_"

// Variables that are not configuration keys but are read elsewhere: serve
// skips them without a warning (a shell that exports SWITCHYARD_SERVER for
// the client verbs also starts servers).
var otherVariables = map[string]string{
	"SWITCHYARD_CONFIG":            "the configuration file (serve --config)",
	"SWITCHYARD_SERVER":            "the server the client verbs talk to (--server)",
	"SWITCHYARD_TOKEN":             "the API token the client verbs and bench send",
	"SWITCHYARD_AGENT":             "the agent task submit submits as (--agent)",
	"SWITCHYARD_INSTANCE_TOKEN":    "the token of switchyard instance, and of bench's forwarded instance",
	"SWITCHYARD_DATABASE_URL":      "bench's PostgreSQL database (--database-url); serve's is store.url",
	"SWITCHYARD_TEST_DATABASE_URL": "the PostgreSQL database of the repository's tests",
}

// envKey is one settable key.
type envKey struct {
	path  string // YAML path: log.format
	name  string // SWITCHYARD_LOG_FORMAT
	field reflect.Value
	// deprecated, on an old spelling of a name (SWITCHYARD_CLUSTER_LEASE_T_T_L,
	// from before acronyms stayed whole), is the name to use instead.
	deprecated string
	// fileOnly marks a list or map of objects, which no variable can set.
	fileOnly bool
}

// envKeys lists the scalar keys of c, by variable name, old spellings
// included (marked deprecated).
func envKeys(c *Config) map[string]envKey {
	out := map[string]envKey{}
	add := func(p, n, old string, fv reflect.Value) {
		out[n[1:]] = envKey{path: p, name: EnvPrefix + n[1:], field: fv}
		if old != n {
			out[old[1:]] = envKey{path: p, name: EnvPrefix + old[1:], field: fv, deprecated: EnvPrefix + n[1:]}
		}
	}
	var walk func(v reflect.Value, path, name, old string)
	walk = func(v reflect.Value, path, name, old string) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			p, n, o := joinPath(path, tag), name+"_"+upperSnake(tag), old+"_"+oldUpperSnake(tag)
			fv := v.Field(i)
			switch {
			case f.Type == reflect.TypeOf(Duration(0)):
				add(p, n, o, fv)
			case f.Type.Kind() == reflect.Struct:
				walk(fv, p, n, o)
			case isScalar(f.Type.Kind()),
				f.Type.Kind() == reflect.Slice && isScalar(f.Type.Elem().Kind()):
				add(p, n, o, fv)
			case f.Type.Kind() == reflect.Slice || f.Type.Kind() == reflect.Map:
				out[n[1:]] = envKey{path: p, name: EnvPrefix + n[1:], field: fv, fileOnly: true}
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "", "", "")
	return out
}

// isScalar reports whether a configuration field of this kind is one value
// that a variable can set (strings, booleans and numbers of every size).
func isScalar(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// upperSnake turns maxInFlight into MAX_IN_FLIGHT, keeping acronyms whole:
// leaseTTL is LEASE_TTL, maxHTTPBody MAX_HTTP_BODY.
func upperSnake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if !unicode.IsUpper(prev) || nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// oldUpperSnake is upperSnake as it was, an underscore before every capital
// (leaseTTL → LEASE_T_T_L): those names are still read, with a warning.
func oldUpperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// EnvVariables lists every variable with the key it sets, sorted, for the
// documentation.
func EnvVariables() [][2]string {
	c := Default()
	var out [][2]string
	for _, k := range envKeys(&c) {
		if k.deprecated == "" && !k.fileOnly {
			out = append(out, [2]string{k.name, k.path})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// ApplyEnv applies SWITCHYARD_* variables from environ (os.Environ form).
// A value that does not parse is an error naming the variable and its key;
// variables that set nothing are returned as warnings.
func (c *Config) ApplyEnv(environ []string) (warnings []string, err error) {
	// Only the lane variables are kept, for EngineConfig: the environment
	// may hold secrets of other programs, and the Config may be printed.
	c.environ = nil
	for _, kv := range environ {
		if strings.HasPrefix(kv, engine.LaneEnvPrefix) {
			c.environ = append(c.environ, kv)
		}
	}
	keys := envKeys(c)
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if strings.HasPrefix(name, engine.LaneEnvPrefix) {
			continue // lanes: engine.ApplyLaneEnv, in EngineConfig
		}
		if _, ok := otherVariables[name]; ok {
			continue
		}
		k, ok := keys[strings.TrimPrefix(name, EnvPrefix)]
		if !ok {
			warnings = append(warnings, fmt.Sprintf("%s sets no configuration key; ignored", name))
			continue
		}
		if k.fileOnly {
			hint := ""
			if k.path == "engine.lanes" {
				hint = " (a lane's settings: " + engine.LaneEnvPrefix + "<NAME>)"
			}
			warnings = append(warnings, fmt.Sprintf("%s: %s is a list or map of objects, set in the configuration file only%s; ignored", name, k.path, hint))
			continue
		}
		if k.deprecated != "" {
			warnings = append(warnings, fmt.Sprintf("%s is deprecated: it is spelt %s now (read as %s for now)", name, k.deprecated, k.path))
		}
		if !utf8.ValidString(val) {
			return warnings, fmt.Errorf("%s (%s): the value is not valid UTF-8", name, k.path)
		}
		if err := setScalar(k.field, val); err != nil {
			return warnings, fmt.Errorf("%s (%s): %w", name, k.path, err)
		}
	}
	return warnings, nil
}

// setScalar sets a scalar from its text, or a list of scalars from its
// comma-separated items (spaces around them trimmed, empty ones dropped: ""
// empties the list).
func setScalar(v reflect.Value, s string) error {
	if v.Kind() == reflect.Slice {
		list := reflect.MakeSlice(v.Type(), 0, 0)
		for i, item := range strings.Split(s, ",") {
			if strings.TrimSpace(item) == "" {
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if err := setScalar(e, item); err != nil {
				return fmt.Errorf("item %d: %w", i+1, err)
			}
			list = reflect.Append(list, e)
		}
		v.Set(list)
		return nil
	}
	s = strings.TrimSpace(s)
	switch {
	case v.Type() == reflect.TypeOf(Duration(0)):
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 30s, 5m)", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.CanInt():
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case v.CanUint():
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not a non-negative integer", s)
		}
		v.SetUint(n)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.CanFloat():
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	}
	return nil
}
