package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// NewSecret makes a token secret: 32 random bytes in hex.
func NewSecret() string { return randomHex(32) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

func newTokenID() string { return "tok-" + randomHex(8) }

// BootstrapCommand is the command that makes secret the first admin token;
// dexd proposes it for --acl-bootstrap-token-file.
func BootstrapCommand(name, secret string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Bootstrap: true, Token: &fsmpb.AclToken{
		Id: newTokenID(), Name: name, Role: fsmpb.TokenRole_TOKEN_ROLE_ADMIN, SecretSha256: HashSecret(secret),
	}}}}
}

// CreateToken makes a token; its secret is in this answer only.
func (a *Admin) CreateToken(ctx context.Context, req *dexv1.CreateTokenRequest) (*dexv1.CreateTokenResponse, error) {
	if err := required("name", req.Name); err != nil {
		return nil, err
	}
	if !fsm.ValidRole(fsmpb.TokenRole(req.Role)) {
		return nil, status.Error(codes.InvalidArgument, "role must be admin, client or worker")
	}
	secret := NewSecret()
	tok := &fsmpb.AclToken{Id: newTokenID(), Name: req.Name, Role: fsmpb.TokenRole(req.Role), WorkerId: req.WorkerId, SecretSha256: HashSecret(secret)}
	if err := a.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: tok}}}); err != nil {
		return nil, err
	}
	return &dexv1.CreateTokenResponse{Token: a.applied(tok), Secret: secret}, nil
}

// ListTokens lists every token, revoked ones included, without secrets.
func (a *Admin) ListTokens(ctx context.Context, _ *dexv1.ListTokensRequest) (*dexv1.ListTokensResponse, error) {
	resp := &dexv1.ListTokensResponse{}
	for _, t := range a.node.State().Tokens() {
		resp.Tokens = append(resp.Tokens, t.API())
	}
	return resp, nil
}

// RevokeToken revokes a token on every node, once applied there.
func (a *Admin) RevokeToken(ctx context.Context, req *dexv1.RevokeTokenRequest) (*dexv1.RevokeTokenResponse, error) {
	if err := required("token_id", req.TokenId); err != nil {
		return nil, err
	}
	if err := a.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_RevokeToken{RevokeToken: &fsmpb.RevokeToken{TokenId: req.TokenId}}}); err != nil {
		return nil, err
	}
	return &dexv1.RevokeTokenResponse{}, nil
}

// BootstrapACL makes the first admin token, once: the state machine refuses
// it when any token exists, so two racing callers cannot both get one.
func (a *Admin) BootstrapACL(ctx context.Context, _ *dexv1.BootstrapACLRequest) (*dexv1.BootstrapACLResponse, error) {
	if a.node.State().HasTokens() {
		return nil, status.Error(codes.FailedPrecondition, "ACL bootstrap already done: the cluster has tokens")
	}
	secret := NewSecret()
	cmd := BootstrapCommand("bootstrap", secret)
	if err := a.propose(ctx, cmd); err != nil {
		return nil, err
	}
	return &dexv1.BootstrapACLResponse{Token: a.applied(cmd.GetCreateToken().Token), Secret: secret}, nil
}

// applied is the stored row of a token just created (with its creation
// time), as the API shows it.
func (a *Admin) applied(t *fsmpb.AclToken) *dexv1.AclToken {
	for _, row := range a.node.State().Tokens() {
		if row.Id == t.Id {
			return row.API()
		}
	}
	return t.API()
}
