package server_test

import (
	"net/http"
	"testing"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The admin API creates groups with the settings, and refuses unknown ones.
func TestAdminCreatesGroupWithPolicy(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	adm := adminClient(ts)
	g, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "alice", UserIDs: []string{"bob"}, AddPolicy: "everyone", HistoryVisibility: "all"})
	if err != nil || g.AddPolicy != pb.GroupAddPolicy_GROUP_ADD_POLICY_EVERYONE || g.HistoryVisibility != pb.HistoryVisibility_HISTORY_VISIBILITY_ALL {
		t.Fatalf("admin create with settings: %v %v", g, err)
	}
	d, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "alice"})
	if err != nil || d.AddPolicy != pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS || d.HistoryVisibility != pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN {
		t.Fatalf("admin create with defaults: %v %v", d, err)
	}
	if _, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "alice", AddPolicy: "anyone"}); !isHTTP(err, http.StatusBadRequest) {
		t.Fatalf("unknown add policy: %v, want 400", err)
	}
	if _, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "alice", HistoryVisibility: "some"}); !isHTTP(err, http.StatusBadRequest) {
		t.Fatalf("unknown history visibility: %v, want 400", err)
	}
	// bob, a plain member, adds under "everyone".
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	if err := bob.AddMembers(ctx, g.ConversationId, "carol"); err != nil {
		t.Fatal(err)
	}
}
