package fsm

import (
	"crypto/subtle"
	"encoding/hex"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// ACL tokens: one row per token, found by id or by its secret's hash.
const (
	// maxTokenName bounds a token's name.
	maxTokenName = 128
)

// ValidRole reports whether r is one of the roles a token may have.
func ValidRole(r fsmpb.TokenRole) bool {
	switch r {
	case fsmpb.TokenRole_TOKEN_ROLE_ADMIN, fsmpb.TokenRole_TOKEN_ROLE_CLIENT, fsmpb.TokenRole_TOKEN_ROLE_WORKER:
		return true
	}
	return false
}

func validSecretHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	b, err := hex.DecodeString(h)
	// Lower case only, so one secret has one index key.
	return err == nil && hex.EncodeToString(b) == h
}

func (a *applier) createToken(c *fsmpb.CreateToken) *Result {
	t := c.GetToken()
	if t == nil {
		return rejected(reject(CodeInvalid, "token is required"))
	}
	if r := validID("token id", t.Id); r != nil {
		return rejected(r)
	}
	if t.Name == "" {
		return rejected(reject(CodeInvalid, "token name is required"))
	}
	if len(t.Name) > maxTokenName {
		return rejected(reject(CodeInvalid, "token name is longer than %d bytes", maxTokenName))
	}
	if !ValidRole(t.Role) {
		return rejected(reject(CodeInvalid, "token role must be admin, client or worker"))
	}
	if t.WorkerId != "" {
		if t.Role != fsmpb.TokenRole_TOKEN_ROLE_WORKER {
			return rejected(reject(CodeInvalid, "only a worker token is bound to a Worker id"))
		}
		if r := validID("worker id", t.WorkerId); r != nil {
			return rejected(r)
		}
	}
	if !validSecretHash(t.SecretSha256) {
		return rejected(reject(CodeInvalid, "the secret's hash must be 64 lower-case hex digits"))
	}
	if t.Revoked || t.RevokedAtMs != 0 {
		return rejected(reject(CodeInvalid, "a new token cannot be revoked"))
	}
	if c.Bootstrap {
		if t.Role != fsmpb.TokenRole_TOKEN_ROLE_ADMIN {
			return rejected(reject(CodeInvalid, "the bootstrap token is an admin token"))
		}
		if a.anyToken() {
			return rejected(reject(CodeFailedPrecondition, "ACL bootstrap already done: the cluster has tokens"))
		}
	}
	if a.token(t.Id) != nil {
		return rejected(reject(CodeAlreadyExists, "token %s exists", t.Id))
	}
	if a.tx.TokenBySecret(t.SecretSha256) != nil {
		return rejected(reject(CodeAlreadyExists, "a token with this secret exists"))
	}
	row := t.CloneVT()
	row.CreatedAtMs = a.now
	a.insert(store.TableTokens, row)
	return &Result{}
}

func (a *applier) revokeToken(c *fsmpb.RevokeToken) *Result {
	if r := validID("token id", c.TokenId); r != nil {
		return rejected(r)
	}
	old := a.token(c.TokenId)
	if old == nil {
		return rejected(reject(CodeNotFound, "token %s not found", c.TokenId))
	}
	if old.Revoked {
		return &Result{} // revoking twice is the same as once
	}
	row := old.CloneVT()
	row.Revoked, row.RevokedAtMs = true, a.now
	a.insert(store.TableTokens, row)
	return &Result{}
}

func (a *applier) token(id string) *fsmpb.AclToken {
	return a.tx.Token(id)
}

func (a *applier) anyToken() bool { return a.tx.HasTokens() }

// TokenBySecretHash returns the token whose secret hashes to sha256Hex, or
// nil. Revoked tokens are returned too: the caller decides.
func (s *State) TokenBySecretHash(sha256Hex string) *fsmpb.AclToken {
	t := s.tx.TokenBySecret(sha256Hex)
	if t == nil {
		return nil
	}
	// The index lookup already matched; the constant-time compare keeps the
	// final check from depending on where two hashes first differ.
	if subtle.ConstantTimeCompare([]byte(t.SecretSha256), []byte(sha256Hex)) != 1 {
		return nil
	}
	return t
}

// Tokens returns every token, revoked ones included, in id order.
func (s *State) Tokens() []*fsmpb.AclToken {
	return store.All[*fsmpb.AclToken](s.tx, store.TableTokens, store.IndexID)
}

// HasTokens reports whether any token was ever created (ACL bootstrapped).
func (s *State) HasTokens() bool {
	return s.tx.HasTokens()
}
