package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// A 1:1 send to a user id without an account is refused with NO_SUCH_USER
// by default (before, it was stored and answered "sent" for a user who
// could never read it); the user becomes reachable once they have one:
// registered, or logged in once with an app-minted token.
func TestSendToUnknownUserIsRefused(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.UnknownRecipients = "" }) // the default
	tc := transports[0]
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	ctx := ctx10(t)

	if _, err := alice.SendText(ctx, "ghost", "hello?"); errCode(err) != pb.ErrorCode_ERROR_CODE_NO_SUCH_USER {
		t.Fatalf("send to an unknown user: %v, want NO_SUCH_USER", err)
	}
	// The conversation form of the same send.
	f := &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: &pb.Send{
		ClientMsgId: "m-conv", ConversationId: "p:alice:ghost", Payload: []byte("x")}}}
	if _, err := alice.Do(ctx, f); errCode(err) != pb.ErrorCode_ERROR_CODE_NO_SUCH_USER {
		t.Fatalf("send to an unknown user's conversation: %v, want NO_SUCH_USER", err)
	}
	// Over HTTP the same code is 404 no_such_user.
	tok := ts.mint(t, "alice")
	st, body := httpDo(t, http.MethodPost, ts.httpBase+"/v1/rpc", map[string]string{"Authorization": "Bearer " + tok},
		[]byte(`{"send":{"clientMsgId":"bQ==","to":"ghost","payload":"aGk="}}`))
	if st != http.StatusNotFound || !strings.Contains(string(body), "no_such_user") {
		t.Fatalf("HTTP send to an unknown user: %d %s, want 404 no_such_user", st, body)
	}
	// Notes to oneself need no other account.
	if _, err := alice.SendText(ctx, "alice", "note"); err != nil {
		t.Fatalf("note to self: %v", err)
	}

	// Once ghost registers, the same send goes through at once (a refusal
	// is not remembered).
	if st, body := httpDo(t, http.MethodPost, ts.httpBase+"/v1/register", nil,
		[]byte(`{"username":"ghost","password":"ghost-secret-1"}`)); st != http.StatusCreated {
		t.Fatalf("register ghost: %d %s", st, body)
	}
	if _, err := alice.SendText(ctx, "ghost", "hello?"); err != nil {
		t.Fatalf("send after ghost registered: %v", err)
	}

	// A user of an app-minted token has an account after their first login.
	now := time.Now()
	appTok := sign(t, jwt.SigningMethodHS256, []byte(testAppSecret), jwt.MapClaims{
		"iss": "app", "aud": "parley", "sub": "appuser", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()})
	if _, err := alice.SendText(ctx, "appuser", "before"); errCode(err) != pb.ErrorCode_ERROR_CODE_NO_SUCH_USER {
		t.Fatalf("send to an app user before their first login: %v, want NO_SUCH_USER", err)
	}
	app, rec := ts.connectToken(t, appTok, "u1", "cli", tc)
	defer app.Close()
	if _, err := alice.SendText(ctx, "appuser", "after"); err != nil {
		t.Fatalf("send to an app user after their first login: %v", err)
	}
	eventually(t, "the app user receives the message", func() bool { return rec.count() == 1 })
}

// With unknown_recipients: accept, a send to a user without an account is
// stored and reaches them at their first login.
func TestSendToUnknownUserAccepted(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.UnknownRecipients = "accept" })
	tc := transports[0]
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	ctx := ctx10(t)
	if _, err := alice.SendText(ctx, "later", "waiting for you"); err != nil {
		t.Fatalf("send to a user without an account: %v", err)
	}
	now := time.Now()
	appTok := sign(t, jwt.SigningMethodHS256, []byte(testAppSecret), jwt.MapClaims{
		"iss": "app", "aud": "parley", "sub": "later", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()})
	c, err := client.Dial(ctx, client.Options{Addr: ts.addr(tc), Token: appTok, DeviceID: "l1", DeviceType: "cli", Codec: tc.codec})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	page, err := c.SyncMessages(ctx, "p:alice:later", 0, 10)
	if err != nil || len(page.Messages) != 1 || string(page.Messages[0].Payload) != "waiting for you" {
		t.Fatalf("the waiting message: %v %v", page, err)
	}
}

// errCode is the wire code of a request's error (UNSPECIFIED for none or
// for an error that is not the server's answer).
func errCode(err error) pb.ErrorCode {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return pb.ErrorCode_ERROR_CODE_UNSPECIFIED
}

func TestUnknownRecipientsConfigChecked(t *testing.T) {
	t.Parallel()
	_, err := server.New(server.Config{DataDir: t.TempDir(), UnknownRecipients: "maybe", AdminAPIKeys: []string{testAPIKey}})
	if err == nil || !strings.Contains(err.Error(), "unknown_recipients") {
		t.Fatalf("bad unknown_recipients: %v", err)
	}
}

// The Go SDK's IsCode holds for HTTP answers too: the HTTP API's code
// strings map to the wire codes a socket request gets.
func TestIsCodeOverHTTP(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	if _, err := client.Register(ctx, ts.httpBase, "dora", "dora-secret-1"); err != nil {
		t.Fatal(err)
	}
	_, err := client.Register(ctx, ts.httpBase, "dora", "dora-secret-2")
	if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		t.Fatalf("a taken name: %v, want CONFLICT", err)
	}
	_, err = client.Login(ctx, ts.httpBase, "dora", "wrong-password")
	if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
		t.Fatalf("a wrong password: %v, want UNAUTHENTICATED", err)
	}
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Code != "invalid_credentials" {
		t.Fatalf("the HTTP API's own code is kept: %#v", err)
	}
}
