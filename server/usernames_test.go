package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

type apiError struct {
	Error struct {
		Code string `json:"code"`
	} `json:"error"`
}

func register(t *testing.T, ts *testServer, name, password string) (int, tokenResp) {
	t.Helper()
	var tr tokenResp
	return post(t, ts.httpBase+"/v1/register", nil, map[string]string{"username": name, "password": password}, &tr), tr
}

func login(t *testing.T, ts *testServer, name, password string) (int, tokenResp) {
	t.Helper()
	var tr tokenResp
	return post(t, ts.httpBase+"/v1/login", nil, map[string]string{"username": name, "password": password}, &tr), tr
}

// Usernames are unique on their case-folded form; the display form is kept
// as the user id, login takes any case, and look-alike punctuation is refused.
func TestUsernamesAreUniqueIgnoringCase(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	const pw = "correct horse"
	if st, tr := register(t, ts, "Alice", pw); st != http.StatusCreated || tr.UserID != "Alice" {
		t.Fatalf("register Alice: %d %+v", st, tr)
	}
	for _, name := range []string{"alice", "ALICE", "aLiCe"} {
		var e apiError
		if st := post(t, ts.httpBase+"/v1/register", nil, map[string]string{"username": name, "password": pw}, &e); st != http.StatusConflict || e.Error.Code != "conflict" {
			t.Errorf("register %s after Alice: %d %q, want 409 conflict", name, st, e.Error.Code)
		}
	}
	for _, name := range []string{"alice.", "alice@", ".alice", "-alice", "al..ice", "al.-ice", "@"} {
		if st, _ := register(t, ts, name, pw); st != http.StatusBadRequest {
			t.Errorf("register %q: %d, want 400", name, st)
		}
	}
	for _, name := range []string{"Alice", "alice", "ALICE"} {
		if st, tr := login(t, ts, name, pw); st != http.StatusOK || tr.UserID != "Alice" {
			t.Errorf("login as %s: %d %+v, want 200 as Alice", name, st, tr)
		}
	}
	if st, _ := login(t, ts, "alice", "wrong password"); st != http.StatusUnauthorized {
		t.Errorf("login with a wrong password: %d", st)
	}

	// The admin API: creating a look-alike is a conflict, minting for one too;
	// minting for the exact id works.
	ctx := ctx10(t)
	adm := adminClient(ts)
	if _, err := adm.CreateUser(ctx, "ALICE", pw); !isHTTP(err, http.StatusConflict) {
		t.Errorf("admin create ALICE: %v, want 409", err)
	}
	if _, err := adm.CreateUser(ctx, "bob.", pw); !isHTTP(err, http.StatusBadRequest) {
		t.Errorf("admin create bob.: %v, want 400", err)
	}
	if _, err := adm.MintToken(ctx, "alice", 0); !hasCode(err, http.StatusConflict, "conflict") {
		t.Errorf("mint for alice while Alice exists: %v, want 409 conflict", err)
	}
	if tok := ts.mint(t, "Alice"); tok == "" {
		t.Error("mint for Alice gave no token")
	}
	// A token-only id minted first takes its name as well.
	ts.mint(t, "Zed")
	if st, _ := register(t, ts, "zed", pw); st != http.StatusConflict {
		t.Errorf("register zed after the admin minted Zed: %d, want 409", st)
	}
}

// Concurrent registrations of look-alike names: exactly one wins.
func TestConcurrentLookAlikeRegistrations(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	for round := range 3 {
		names := []string{"Bob", "bob", "BOB", "bOB"}
		codes := make([]int, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = register(t, ts, fmt.Sprintf("%s%d", n, round), "correct horse")
			}()
		}
		wg.Wait()
		created := 0
		for i, c := range codes {
			switch c {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: register %s: %d", round, names[i], c)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d of %v registered, want exactly 1 (codes %v)", round, created, names, codes)
		}
	}
}
