package schema

import (
	"strings"
	"testing"
)

const text = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["maxShare"],
  "properties": {
    "maxShare": {"type": "number", "minimum": 0, "maximum": 1},
    "mode": {"type": "string", "enum": ["strict", "loose"]},
    "burst": {"type": "integer", "minimum": 1},
    "agents": {"type": "array", "maxItems": 2, "items": {"type": "string", "minLength": 1}}
  }
}`

func TestValidateNamesTheField(t *testing.T) {
	s, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ doc, want string }{
		{`{"maxShare": 0.5}`, ""},
		{`{"maxShare": 1, "mode": "loose", "burst": 3, "agents": ["a"]}`, ""},
		{``, ""}, // no configuration: the defaults
		{`{"maxShare": 1.5}`, "config.maxShare: must be ≤ 1"},
		{`{"maxShare": -1}`, "config.maxShare: must be ≥ 0"},
		{`{"maxShare": "half"}`, "config.maxShare: must be a number, not a string"},
		{`{}`, "config.maxShare: is required"},
		{`{"maxShare": 0.5, "extra": 1}`, "config.extra: unknown field"},
		{`{"maxShare": 0.5, "mode": "x"}`, `config.mode: must be one of "strict", "loose"`},
		{`{"maxShare": 0.5, "burst": 1.5}`, "config.burst: must be an integer, not a number"},
		{`{"maxShare": 0.5, "agents": ["a", ""]}`, "config.agents[1]: must be at least 1 character long"},
		{`{"maxShare": 0.5, "agents": ["a", "b", "c"]}`, "config.agents: must have at most 2 items"},
		{`[1]`, "config: must be an object, not an array"},
		{`{"maxShare": `, "config: not JSON"},
	} {
		err := s.Validate([]byte(c.doc))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.doc, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.doc, err, c.want)
		case err != nil && !IsError(err):
			t.Errorf("%s: %T is not a *schema.Error", c.doc, err)
		}
	}
}

func TestParseRefusesWhatItCannotCheck(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"type": "object", "properties": {"x": {"pattern": "^a"}}}`, `schema.properties.x: keyword "pattern" is not supported`},
		{`{"type": "float"}`, `schema.type: "float" is not one of`},
		{`{"type": "number", "minimum": 2, "maximum": 1}`, "schema: minimum is above maximum"},
		{`{"additionalProperties": {}}`, "schema.additionalProperties: must be a boolean"},
		{`[]`, "schema: must be an object"},
	} {
		_, err := Parse([]byte(c.text))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.text, err, c.want)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	s := &Schema{Type: "object", Properties: map[string]*Schema{"n": {Type: "integer", Minimum: Ptr(1.0)}}, Required: []string{"n"}}
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Validate([]byte(`{"n": 0}`)); err == nil || err.Error() != "config.n: must be ≥ 1" {
		t.Fatalf("got %v", err)
	}
}
