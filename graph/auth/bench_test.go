package auth_test

import (
	"fmt"
	"testing"

	"github.com/switchyard/switchyard/graph/auth"
)

// BenchmarkAuthenticate measures what a request pays for its token with 100
// tokens configured: a known token (found by its SHA-256 after the first
// time), and an unknown one (checked against every hash, as it must be).
func BenchmarkAuthenticate(b *testing.B) {
	tokens := make([]auth.Token, 100)
	var last string
	for i := range tokens {
		tok, err := auth.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		h, err := auth.HashToken(tok)
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = auth.Token{Name: fmt.Sprint("t", i), Hash: h, Role: auth.RoleReader}
		last = tok
	}
	a, err := auth.NewAuthenticator(tokens)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("known", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.AuthenticateHeader("Bearer " + last); err != nil {
				b.Fatal(err)
			}
		}
	})
	unknown, _ := auth.NewToken()
	b.Run("unknown", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.AuthenticateHeader("Bearer " + unknown); err == nil {
				b.Fatal("authenticated")
			}
		}
	})
}
