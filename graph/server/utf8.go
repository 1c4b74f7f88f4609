// Strings that are not UTF-8 (graph/internal/jsonutf8): the body of a
// request is checked before it is decoded; the place of the first bad string
// is named as a path ("variables.in.agentId", "query").

package server

import (
	"net/url"
	"unicode/utf8"

	"github.com/switchyard/switchyard/graph/internal/jsonutf8"
)

// invalidUTF8InJSON reports whether every string of a JSON document is
// UTF-8, and if not, the path of the first that is not (jsonutf8.Check). A
// document that is not JSON passes: the transport reports that.
func invalidUTF8InJSON(doc []byte) (string, bool) { return jsonutf8.Check(doc) }

// invalidUTF8InQuery checks the parameters of a GET request: query and
// operationName as they are, variables and extensions as JSON.
func invalidUTF8InQuery(q url.Values) (string, bool) {
	for name, values := range q {
		for _, v := range values {
			switch name {
			case "variables", "extensions":
				if field, ok := invalidUTF8InJSON([]byte(v)); !ok {
					if field == "body" {
						return name, false
					}
					return name + "." + field, false
				}
			default:
				if !utf8.ValidString(v) {
					return name, false
				}
			}
		}
	}
	return "", true
}
