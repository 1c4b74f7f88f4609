package client

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkUTF8 refuses a request whose query or variables hold a string that
// is not UTF-8: encoding/json would send it with U+FFFD in place of the bad
// bytes, so the server would act on another string than the one given
// (another agent id, say) without a word. The error names the variable.
func checkUTF8(query string, vars any) error {
	if !utf8.ValidString(query) {
		return fmt.Errorf("query: not valid UTF-8")
	}
	if path := invalidString(reflect.ValueOf(vars), "variables", 0); path != "" {
		return fmt.Errorf("%s: not valid UTF-8 (strings must be UTF-8; invalid bytes are not sent)", path)
	}
	return nil
}

// invalidString returns the path of the first string in v that is not
// UTF-8, or "".
func invalidString(v reflect.Value, path string, depth int) string {
	if depth > 64 || !v.IsValid() {
		return ""
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return path
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return invalidString(v.Elem(), path, depth+1)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // bytes: base64 in JSON
		}
		for i := range v.Len() {
			if p := invalidString(v.Index(i), path+"."+strconv.Itoa(i), depth+1); p != "" {
				return p
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := fmt.Sprint(it.Key().Interface())
			if !utf8.ValidString(k) {
				return path + ".(a key)"
			}
			if p := invalidString(it.Value(), path+"."+k, depth+1); p != "" {
				return p
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if p := invalidString(v.Field(i), path+"."+name, depth+1); p != "" {
				return p
			}
		}
	}
	return ""
}
