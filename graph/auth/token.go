// Tokens and their stored form: generating a token, hashing it for the
// configuration, and checking a presented token against a stored hash.

package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// TokenPrefix starts every token NewToken makes, so that a token is
// recognisable in a secret scanner and in a mistaken paste.
const TokenPrefix = "swy_"

// MinTokenLength is the shortest token HashToken accepts.
const MinTokenLength = 32

// MaxTokenLength is the longest token checked; longer ones are refused
// without hashing.
const MaxTokenLength = 512

// HashScheme names the hash in the stored form.
const HashScheme = "hmac-sha256"

const (
	tokenBytes = 32
	saltBytes  = 16
)

var b64 = base64.RawURLEncoding

// NewToken returns a new random token: TokenPrefix and 32 random bytes in
// base64url.
func NewToken() (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return TokenPrefix + b64.EncodeToString(b[:]), nil
}

// Hash is the stored form of a token: a salt and HMAC-SHA256(salt, token).
type Hash struct {
	salt   [saltBytes]byte
	digest [sha256.Size]byte
}

// HashToken returns the stored form of a token, with a new random salt. The
// token must be at least MinTokenLength characters (see the package
// documentation: tokens must be random, as NewToken makes them).
func HashToken(token string) (string, error) {
	if err := checkToken(token); err != nil {
		return "", err
	}
	var h Hash
	if _, err := rand.Read(h.salt[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	h.digest = digest(h.salt[:], token)
	return h.String(), nil
}

func checkToken(token string) error {
	switch {
	case len(token) < MinTokenLength:
		return fmt.Errorf("a token must be at least %d characters of random data (switchyard token new makes one); got %d", MinTokenLength, len(token))
	case len(token) > MaxTokenLength:
		return fmt.Errorf("a token must be at most %d characters; got %d", MaxTokenLength, len(token))
	case strings.TrimSpace(token) != token || strings.ContainsAny(token, " \t\r\n"):
		return errors.New("a token must not contain spaces or line breaks")
	}
	return nil
}

func digest(salt []byte, token string) [sha256.Size]byte {
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(token))
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// String returns the stored form: "hmac-sha256:SALT:DIGEST".
func (h Hash) String() string {
	return HashScheme + ":" + b64.EncodeToString(h.salt[:]) + ":" + b64.EncodeToString(h.digest[:])
}

// ParseHash reads a stored hash.
func ParseHash(s string) (Hash, error) {
	var h Hash
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme != HashScheme {
		return h, fmt.Errorf("not a token hash: want %s:SALT:DIGEST (switchyard token hash prints one)", HashScheme)
	}
	salt, dig, ok := strings.Cut(rest, ":")
	if !ok {
		return h, fmt.Errorf("not a token hash: want %s:SALT:DIGEST", HashScheme)
	}
	strict := b64.Strict()
	if len(salt) != b64.EncodedLen(saltBytes) {
		return h, fmt.Errorf("the salt of a token hash must be %d bytes of base64url", saltBytes)
	}
	if n, err := strict.Decode(h.salt[:], []byte(salt)); err != nil || n != saltBytes {
		return h, fmt.Errorf("the salt of a token hash must be %d bytes of base64url", saltBytes)
	}
	if len(dig) != b64.EncodedLen(sha256.Size) {
		return h, fmt.Errorf("the digest of a token hash must be %d bytes of base64url", sha256.Size)
	}
	if n, err := strict.Decode(h.digest[:], []byte(dig)); err != nil || n != sha256.Size {
		return h, fmt.Errorf("the digest of a token hash must be %d bytes of base64url", sha256.Size)
	}
	return h, nil
}

// Matches reports whether token is the token of this hash, in constant time
// for tokens of any content.
func (h Hash) Matches(token string) bool {
	if len(token) > MaxTokenLength {
		return false
	}
	d := digest(h.salt[:], token)
	return subtle.ConstantTimeCompare(d[:], h.digest[:]) == 1
}
