package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// The admin API refuses to mint a token for a disabled user: the refusal is
// 403 "user_disabled", and enabling the user again makes minting work.
func TestMintRefusedForDisabledUser(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	adm := adminClient(ts)
	if _, err := adm.CreateUser(ctx, "dora", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.SetDisabled(ctx, "dora", true); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.MintToken(ctx, "dora", 0); !hasCode(err, http.StatusForbidden, "user_disabled") {
		t.Fatalf("mint for a disabled user: %v, want 403 user_disabled", err)
	}
	if _, err := adm.SetDisabled(ctx, "dora", false); err != nil {
		t.Fatal(err)
	}
	if tok := ts.mint(t, "dora"); tok == "" {
		t.Fatal("mint after enabling gave no token")
	}
}

// App-minted tokens must carry exp, iat and nbf as JSON numbers (RFC 7519
// NumericDate); a string that looks like a number is refused.
func TestAppTokenDatesMustBeNumbers(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	secret := []byte(testAppSecret)
	now := time.Now()
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "app", "aud": "parley", "sub": "alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	}
	str := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	cases := map[string][2]any{
		"exp as string":       {"exp", str(now.Add(time.Hour))},
		"iat as string":       {"iat", str(now)},
		"nbf as string":       {"nbf", str(now.Add(-time.Minute))},
		"exp as json.Number":  {"exp", json.Number(str(now.Add(time.Hour)) + "e0")}, // a number: accepted below
		"exp as bool":         {"exp", true},
		"exp as object":       {"exp", map[string]any{"t": 1}},
		"exp as float string": {"exp", str(now.Add(time.Hour)) + ".5"},
		"iat null":            {"iat", nil},
	}
	accepted := map[string]bool{"exp as json.Number": true, "iat null": true}
	for name, kv := range cases {
		t.Run(name, func(t *testing.T) {
			claims := good()
			claims[kv[0].(string)] = kv[1]
			tok := sign(t, jwt.SigningMethodHS256, secret, claims)
			c := dialRawWS(t, ts.wsURL, wire.JSON)
			if accepted[name] {
				if f := c.auth(tok, "d1", "web"); f.GetAuthOk().GetUserId() != "alice" {
					t.Fatalf("auth: %v", f)
				}
				return
			}
			c.send(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: tok, DeviceId: "d1", DeviceType: "web"}}})
			wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED, pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED)

			if code, _ := httpDo(t, http.MethodGet, ts.httpBase+"/v1/conversations", bearer(tok), nil); code != http.StatusUnauthorized {
				t.Fatalf("HTTP bearer: status %d, want 401", code)
			}
		})
	}
}
