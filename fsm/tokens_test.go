package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func hashOf(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func createToken(id, name string, role fsmpb.TokenRole, worker, secret string, bootstrap bool) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Bootstrap: bootstrap, Token: &fsmpb.AclToken{
		Id: id, Name: name, Role: role, WorkerId: worker, SecretSha256: hashOf(secret),
	}}}}
}

func revokeToken(id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RevokeToken{RevokeToken: &fsmpb.RevokeToken{TokenId: id}}}
}

const (
	admin  = fsmpb.TokenRole_TOKEN_ROLE_ADMIN
	client = fsmpb.TokenRole_TOKEN_ROLE_CLIENT
	worker = fsmpb.TokenRole_TOKEN_ROLE_WORKER
)

func TestTokens_BootstrapOnceThenCreateFindRevoke(t *testing.T) {
	d := newDriver(t)
	if d.f.State().HasTokens() {
		t.Fatal("a new state has tokens")
	}
	d.refused(createToken("t0", "ops", client, "", "s0", true), CodeInvalid) // bootstrap makes an admin
	d.do(createToken("t1", "root", admin, "", "s1", true))
	d.refused(createToken("t2", "again", admin, "", "s2", true), CodeFailedPrecondition)

	d.advance(1000)
	d.do(createToken("t3", "w1", worker, "w-1", "s3", false))
	st := d.f.State()
	got := st.TokenBySecretHash(hashOf("s3"))
	if got == nil || got.Id != "t3" || got.WorkerId != "w-1" || got.Role != worker || got.CreatedAtMs != d.now {
		t.Fatalf("token by secret = %v", got)
	}
	if st.TokenBySecretHash(hashOf("nope")) != nil {
		t.Fatal("an unknown secret found a token")
	}
	if n := len(st.Tokens()); n != 2 {
		t.Fatalf("%d tokens, want 2", n)
	}

	d.do(revokeToken("t3"))
	if tok := d.f.State().TokenBySecretHash(hashOf("s3")); !tok.Revoked || tok.RevokedAtMs != d.now {
		t.Fatalf("after revoke: %v", tok)
	}
	d.do(revokeToken("t3")) // twice is once
	d.refused(revokeToken("t9"), CodeNotFound)
	d.refused(revokeToken(""), CodeInvalid)

	// A revoked token still counts: bootstrap stays done.
	d.refused(createToken("t4", "again", admin, "", "s4", true), CodeFailedPrecondition)
}

func TestTokens_BadInputIsRefusedAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	d.do(createToken("t1", "root", admin, "", "s1", true))
	long := strings.Repeat("x", 300)
	for name, c := range map[string]*fsmpb.Command{
		"no token":         {Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{}}},
		"no id":            createToken("", "n", client, "", "a", false),
		"long id":          createToken(long, "n", client, "", "a", false),
		"no name":          createToken("t2", "", client, "", "a", false),
		"long name":        createToken("t2", long, client, "", "a", false),
		"no role":          createToken("t2", "n", fsmpb.TokenRole_TOKEN_ROLE_UNSPECIFIED, "", "a", false),
		"unknown role":     createToken("t2", "n", fsmpb.TokenRole(42), "", "a", false),
		"client bound":     createToken("t2", "n", client, "w-1", "a", false),
		"long worker id":   createToken("t2", "n", worker, long, "a", false),
		"revoked at birth": {Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: &fsmpb.AclToken{Id: "t2", Name: "n", Role: client, SecretSha256: hashOf("a"), Revoked: true}}}},
		"short hash":       {Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: &fsmpb.AclToken{Id: "t2", Name: "n", Role: client, SecretSha256: "abcd"}}}},
		"upper-case hash":  {Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: &fsmpb.AclToken{Id: "t2", Name: "n", Role: client, SecretSha256: strings.ToUpper(hashOf("a"))}}}},
		"not hex hash":     {Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: &fsmpb.AclToken{Id: "t2", Name: "n", Role: client, SecretSha256: strings.Repeat("z", 64)}}}},
	} {
		t.Run(name, func(t *testing.T) { d.t = t; d.refused(c, CodeInvalid) })
	}
	d.t = t
	d.refused(createToken("t1", "dup id", client, "", "other", false), CodeAlreadyExists)
	d.refused(createToken("t2", "dup secret", client, "", "s1", false), CodeAlreadyExists)
}

func TestTokens_SurviveSnapshotRestore(t *testing.T) {
	d := newDriver(t)
	d.do(createToken("t1", "root", admin, "", "s1", true))
	d.do(createToken("t2", "w", worker, "w-7", "s2", false))
	d.do(revokeToken("t2"))
	before := d.f.State().Tokens()
	d.restart()
	after := d.f.State().Tokens()
	if len(after) != len(before) {
		t.Fatalf("%d tokens after restore, want %d", len(after), len(before))
	}
	for i := range before {
		if before[i].String() != after[i].String() {
			t.Fatalf("token %d: %v after restore, want %v", i, after[i], before[i])
		}
	}
	if tok := d.f.State().TokenBySecretHash(hashOf("s2")); tok == nil || !tok.Revoked {
		t.Fatalf("revoked token after restore: %v", tok)
	}
	d.refused(createToken("t3", "again", admin, "", "s3", true), CodeFailedPrecondition)
}
