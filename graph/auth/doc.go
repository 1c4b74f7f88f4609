// Package auth decides who may use Switchyard's API and what they may do:
// bearer tokens and the identities they stand for, the table of which role
// may run which operation, the gate that enforces it (and the mutation rate
// limits) before any resolver runs, and the audit log of mutations.
//
//	request ─▶ server: Authorization header (HTTP, SSE) or connection_init payload (WebSocket)
//	             │ Authenticator.Authenticate: token → *Identity (name, role, agentId)
//	             ▼
//	           gqlgen: parse, validate ─▶ Gate: every root field against Operations() ─▶ rate limit (mutations)
//	             │                         (FORBIDDEN / RATE_LIMITED: nothing runs)
//	             ▼
//	           resolvers: agents narrowed to their own tasks and schedules (row level)
//	             │
//	             ▼
//	           Audit: one switchyard.audit line per mutation: who, what, which ids, outcome
//
// # Tokens and their hashes
//
// A token is 32 random bytes, written as "swy_" and 43 base64url
// characters (NewToken). The configuration stores only its hash,
// "hmac-sha256:SALT:DIGEST": a random 16-byte salt per token and
// HMAC-SHA256(salt, token), both base64url. A presented token is checked
// against every configured hash with a constant-time comparison.
//
// Why a fast hash and not argon2id or bcrypt: a slow hash protects guessable
// secrets (passwords) by making each guess expensive. A 256-bit random
// token cannot be guessed however fast the hash is — 2^255 evaluations on
// average — so slowness would add nothing against a leaked configuration,
// while it would cost real CPU on every request and hand unauthenticated
// clients a cheap way to burn it (each bad token would cost a slow hash per
// configured token). The salt keeps two configurations that share a token
// from sharing its hash. So the helper generates every token, and
// HashToken refuses inputs shorter than MinTokenLength characters: tokens
// made up by people do not belong here.
package auth
