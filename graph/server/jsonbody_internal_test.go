package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"

	"github.com/switchyard/switchyard/graph/generated"
)

// refParams decodes body as the POST transport did before decodeParams.
func refParams(body []byte) (graphql.RawParams, error) {
	var params graphql.RawParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	err := dec.Decode(&params)
	return params, err
}

var testBodyKeys = newBodyKeys(generated.NewExecutableSchema(generated.Config{}).Schema())

// batchBody is a submitTasks of n items as `switchyard bench --mode batch`
// sends it.
func batchBody(n int) []byte {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"task":{"agentId":"bench-%d","action":{"kind":"click","selector":"css:#go","params":{"n":%d}}}}`, i%8, i))
	}
	return []byte(`{"query":"mutation SubmitBatch ($in: SubmitTasksInput!) {\n\tsubmitTasks(input: $in) { accepted refused }\n}","operationName":"SubmitBatch",` +
		`"variables":{"in":{"items":[` + strings.Join(items, ",") + `]}}}`)
}

var paramsSeeds = []string{
	string(batchBody(3)),
	`{"query":"{ stats { submitted } }"}`,
	`{}`, ` {"query" : "q" , "variables" : { } } `, `{"query":"q"} trailing bytes are not read`,
	`{"query":"q","variables":{"a":[],"b":{},"c":[[1,[2]],{"d":null}],"e":true,"f":false,"g":null}}`,
	`{"query":"q","variables":{"n":[0,-0,7,255,256,-1,1.5,1e3,1E+3,2e-7,123456789012345678901234567890,0.0]}}`,
	`{"query":"q","variables":{"s":["", "a\"b", "tab\there", "\u00e9t\u00e9", "é", "\ud83d\ude00", "😀", "\ud800", "a\/b", "<&>"]}}`,
	`{"query":"q","variables":{"k":1,"k":2,"agentId":"x","agentId":"y"}}`,
	`{"query":"q","extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}},"operationName":"Op"}`,
	// What the fast path leaves to encoding/json.
	`{"query":"q","query":"r"}`, `{"Query":"q"}`, `{"qeury":"q"}`, `{"query":null,"variables":null}`,
	`{"query":5}`, `{"query":"q","variables":[]}`, `[]`, `null`, ``, `   `, `{"query":"q",}`, `{"query":"q"`,
	`{"query":"q","variables":{"a":01}}`, `{"query":"q","variables":{"a":-}}`, `{"query":"q","variables":{"a":1.}}`,
	`{"query":"q","variables":{"a":.5}}`, `{"query":"q","variables":{"a":tru}}`, `{"query":"q","variables":{"a":"x` + "\x01" + `"}}`,
	`{"query":"q","variables":{"a":"` + "\xff" + `"}}`, `{"que\u0072y":"q"}`, `{"query":"q","variables":{"\u0061":1}}`,
	"\ufeff{}", `{"query":"q","variables":{"a":1 2}}`, `{"query":"q","variables":{"a" 1}}`,
	`{"query":"q","variables":` + strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300) + `}`,
}

// FuzzDecodeParams holds decodeParams to encoding/json's answer: the same
// parameters, or the same error; and whatever the fast path takes,
// encoding/json takes and reads alike.
func FuzzDecodeParams(f *testing.F) {
	for _, s := range paramsSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := refParams(body)
		var fast graphql.RawParams
		p := bodyParser{b: body, keys: testBodyKeys}
		if p.params(&fast) {
			if wantErr != nil {
				t.Fatalf("%q: the fast path took what encoding/json refuses (%v)", body, wantErr)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("%q: the fast path read\n%#v\nencoding/json\n%#v", body, fast, want)
			}
		}
		var got graphql.RawParams
		err := decodeParams(body, testBodyKeys, &got)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: error %v, want %v", body, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: read\n%#v\nwant\n%#v", body, got, want)
		}
	})
}

// TestDecodeParamsTakesTheCommonBodies: the fast path must take what
// clients send, or it saves nothing.
func TestDecodeParamsTakesTheCommonBodies(t *testing.T) {
	for _, body := range []string{string(batchBody(100)), paramsSeeds[1], paramsSeeds[5], paramsSeeds[6], paramsSeeds[7], paramsSeeds[9]} {
		var params graphql.RawParams
		p := bodyParser{b: []byte(body), keys: testBodyKeys}
		if !p.params(&params) {
			t.Errorf("the fast path refused %.100s…", body)
		}
	}
	body := batchBody(100)
	fast := testing.AllocsPerRun(20, func() {
		var params graphql.RawParams
		if err := decodeParams(body, testBodyKeys, &params); err != nil {
			t.Fatal(err)
		}
	})
	slow := testing.AllocsPerRun(20, func() {
		if _, err := refParams(body); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("a batch of 100: %.0f allocations, encoding/json %.0f", fast, slow)
	// Per item: four maps of two allocations each, three strings of two
	// (their bytes, their box); the keys and the small number are shared.
	if fast > 100*14+20 {
		t.Errorf("decoding a batch of 100 takes %.0f allocations, want at most %d", fast, 100*14+20)
	}
}

// TestUnescapeSimpleAsEncodingJSON holds the decoder's own unescaping to
// encoding/json's: the same string when it decodes one, nothing when
// encoding/json decodes it otherwise or refuses it.
func TestUnescapeSimpleAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`mutation Submit ($in: SubmitTaskInput!) {\n\tsubmitTask(input: $in) {\n\t\tid\n\t}\n}\n`,
		`\"\\\/\b\f\n\r\t`, `é\n`, `\u00e9`, `\ud800`, `\x`, "a\x01b", "a\xffb", `\`, `a\`, ``, `\\`,
	} {
		got, ok := unescapeSimple([]byte(in))
		var want string
		err := json.Unmarshal([]byte(`"`+in+`"`), &want)
		if ok {
			if err != nil || got != want {
				t.Errorf("%q: unescapeSimple gave %q, encoding/json %q (%v)", in, got, want, err)
			}
			continue
		}
		if err == nil && !strings.Contains(in, `\u`) && !strings.ContainsRune(want, utf8.RuneError) {
			t.Errorf("%q: unescapeSimple declined a string of simple escapes that encoding/json reads as %q", in, want)
		}
	}
}
