package server_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzAdminBodies posts arbitrary bytes as the body of the main JSON
// endpoints (admin and user): each answer must be a well-formed HTTP
// response below 500 (a malformed body is the client's error), and the
// server must keep serving.
func FuzzAdminBodies(f *testing.F) {
	for _, s := range []string{
		`{"user_id":"alice","password":"secret-password"}`, `{"owner":"alice","user_ids":["bob"]}`,
		`{"from":"alice","to":"bob","client_msg_id":"m1","text":"hi"}`, `{"name":"x","muteAll":true}`,
		`{"send":{"clientMsgId":"m","to":"bob","payload":"aGk="}}`, `{"disabled":true}`, `{"role":"admin"}`,
		`{"user_ids":` + string(bytes.Repeat([]byte(`"a",`), 100)) + `"b"]}`, `{`, `null`, `[]`, `{"payload":"!!"}`,
	} {
		f.Add([]byte(s))
	}
	ts := startServer(f, nil)
	tok := ts.mint(f, "alice")
	hc := &http.Client{}
	routes := []struct{ method, path string }{
		{"POST", "/v1/admin/users"}, {"PATCH", "/v1/admin/users/alice"}, {"POST", "/v1/admin/groups"},
		{"PATCH", "/v1/admin/groups/g:0123456789abcdef"}, {"POST", "/v1/admin/groups/g:0123456789abcdef/members"},
		{"PUT", "/v1/admin/groups/g:0123456789abcdef/members/bob/role"}, {"POST", "/v1/admin/messages"},
		{"POST", "/v1/admin/users/alice/rpc"}, {"POST", "/v1/admin/users/alice/contacts"}, {"POST", "/v1/admin/tokens"},
		{"POST", "/v1/rpc"}, {"POST", "/v1/login"}, {"POST", "/v1/register"},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range routes {
			req, _ := http.NewRequest(r.method, ts.httpBase+r.path, bytes.NewReader(body))
			req.Header.Set("X-Api-Key", testAPIKey)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", r.method, r.path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("%s %s with %q: HTTP %d", r.method, r.path, body, resp.StatusCode)
			}
		}
	})
}
