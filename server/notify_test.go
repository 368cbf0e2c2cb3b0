package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/bench"
	"github.com/parleyim/parley/internal/notify/standin"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// pushEnv is a server whose APNs is a local stand-in (checking every
// request) with short push windows.
type pushEnv struct {
	*testServer
	apns *standin.APNs
}

const pushTopic = "com.example.chat"

func startPushServer(t *testing.T, mod func(*server.Config)) *pushEnv {
	t.Helper()
	p8, pub, err := standin.NewP8()
	if err != nil {
		t.Fatal(err)
	}
	apns := standin.NewAPNs(standin.APNsConfig{KeyID: "KEY1234567", TeamID: "TEAM123456", PublicKey: pub, Topic: pushTopic})
	t.Cleanup(apns.Close)
	keyFile := filepath.Join(t.TempDir(), "AuthKey.p8")
	if err := os.WriteFile(keyFile, p8, 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *server.Config) {
		c.APNsKeyFile, c.APNsKeyID, c.APNsTeamID = keyFile, "KEY1234567", "TEAM123456"
		c.APNsEndpoint, c.APNsSandboxEndpoint = apns.URL(), apns.URL()
		server.SetPushClientForTest(c, "apns", apns.Client())
		c.PushDelay, c.PushCoalesce = 300*time.Millisecond, 1500*time.Millisecond
		if mod != nil {
			mod(c)
		}
	})
	t.Cleanup(func() {
		if v := apns.Violations(); len(v) > 0 {
			t.Errorf("APNs stand-in saw bad requests: %q", v)
		}
	})
	return &pushEnv{testServer: ts, apns: apns}
}

func apnsToken(n int) string { return fmt.Sprintf("%064x", n) }

// device connects uid's device and registers an APNs target for it.
func (e *pushEnv) device(t *testing.T, uid, deviceID string, token int, autoAck bool) *client.Client {
	t.Helper()
	c, _, err := dialRecorded(t, client.Options{Addr: e.wsURL, Token: e.mint(t, uid), DeviceID: deviceID,
		DeviceType: deviceID, AutoDeliveredAck: autoAck})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterAPNs(ctx10(t), apnsToken(token), pushTopic, false); err != nil {
		t.Fatalf("RegisterAPNs: %v", err)
	}
	return c
}

// notes are the stand-in's notifications to one device token.
func (e *pushEnv) notes(token int) []standin.APNsNotification {
	var out []standin.APNsNotification
	for _, n := range e.apns.Notifications() {
		if n.Token == apnsToken(token) {
			out = append(out, n)
		}
	}
	return out
}

// waitNotes waits until token has want notifications, then a little longer
// to see that no more come.
func (e *pushEnv) waitNotes(t *testing.T, token, want int) []standin.APNsNotification {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.notes(token)) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(700 * time.Millisecond) // past push_delay: nothing else is due
	got := e.notes(token)
	if len(got) != want {
		t.Fatalf("device %d got %d notifications, want %d: %+v", token, len(got), want, got)
	}
	return got
}

// TestPushOfflineDeviceNotOnlineOne: of two devices of the recipient, the
// one that is connected and acknowledges gets nothing; the one that is not
// connected gets exactly one notification saying who wrote what, for the
// right conversation and seq, with the unread badge.
func TestPushOfflineDeviceNotOnlineOne(t *testing.T) {
	e := startPushServer(t, nil)
	phone := e.device(t, "bob", "phone", 1, false)
	phone.Close() // bob's phone is in his pocket: not connected
	e.device(t, "bob", "laptop", 2, true)
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0])
	ack, err := alice.SendText(ctx10(t), "bob", "lunch at one?")
	if err != nil {
		t.Fatal(err)
	}
	got := e.waitNotes(t, 1, 1)[0]
	if got.Payload.Aps.Alert.Title != "alice" || got.Payload.Aps.Alert.Body != "lunch at one?" {
		t.Errorf("alert = %+v, want alice / lunch at one?", got.Payload.Aps.Alert)
	}
	if got.Payload.ConversationID != ack.ConversationId || got.Payload.Seq != fmt.Sprint(ack.Seq) || got.Payload.Count != 1 {
		t.Errorf("payload names %s/%s count %d, want %s/%d count 1", got.Payload.ConversationID, got.Payload.Seq,
			got.Payload.Count, ack.ConversationId, ack.Seq)
	}
	if got.Payload.Aps.Badge == nil || *got.Payload.Aps.Badge != 1 {
		t.Errorf("badge = %v, want 1 (one unread message)", got.Payload.Aps.Badge)
	}
	if got.Topic != pushTopic || got.PushType != "alert" || got.Priority != 10 || got.CollapseID == "" ||
		got.Payload.Aps.ThreadID != ack.ConversationId {
		t.Errorf("headers: topic %q type %q priority %d collapse %q thread %q", got.Topic, got.PushType, got.Priority,
			got.CollapseID, got.Payload.Aps.ThreadID)
	}
	e.waitNotes(t, 2, 0) // the laptop acknowledged in time

	// The admin API shows the attempt in the phone's log.
	devs, err := adminClient(e.testServer).PushDevices(ctx10(t), "bob")
	if err != nil || len(devs) != 2 {
		t.Fatalf("PushDevices = %+v, %v", devs, err)
	}
	for _, d := range devs {
		if d.DeviceID == "phone" && (len(d.Log) != 1 || d.Log[0].Outcome != "sent" || d.Log[0].Status != 200) {
			t.Errorf("phone's push log = %+v, want one sent attempt", d.Log)
		}
		if d.DeviceID == "laptop" && len(d.Log) != 0 {
			t.Errorf("laptop's push log = %+v, want none", d.Log)
		}
	}
}

// TestPushCoalesces: messages within the delay go out as one notification;
// messages within the coalescing window after it wait and go out as one.
func TestPushCoalesces(t *testing.T) {
	// A coalescing window far longer than the sends below take, however
	// slow the machine: with 1.5 s, the 700 ms waitNotes waits, the 400 ms
	// sleep and two sends under the race detector on a busy machine passed
	// it, and the second notification went out with one message.
	e := startPushServer(t, func(c *server.Config) { c.PushCoalesce = 5 * time.Second })
	e.device(t, "bob", "phone", 1, false).Close()
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0])
	for i := range 3 {
		if _, err := alice.SendText(ctx10(t), "bob", fmt.Sprint("hi ", i)); err != nil {
			t.Fatal(err)
		}
	}
	first := e.waitNotes(t, 1, 1)[0]
	if first.Payload.Count != 3 || first.Payload.Aps.Alert.Body != "3 new messages" || first.Payload.Seq != "3" {
		t.Fatalf("first notification = %+v, want 3 new messages up to seq 3", first.Payload)
	}
	// Two more, each in a window of its own but within the coalescing
	// window of the first notification: one notification for both.
	for i := range 2 {
		if _, err := alice.SendText(ctx10(t), "bob", fmt.Sprint("more ", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	second := e.waitNotes(t, 1, 2)[1]
	if second.Payload.Count != 2 || second.Payload.Seq != "5" {
		t.Fatalf("second notification = %+v, want 2 new messages up to seq 5", second.Payload)
	}
}

// TestPushRules: a muted conversation, a blocked sender and the sender's own
// devices get nothing; the others in the group do.
func TestPushRules(t *testing.T) {
	e := startPushServer(t, nil)
	admin := adminClient(e.testServer)
	g, err := admin.CreateGroup(ctx10(t), client.GroupSpec{Name: "team", Owner: "alice", UserIDs: []string{"bob", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	e.device(t, "alice", "a-phone", 1, false).Close() // the sender's own other device
	e.device(t, "bob", "b-phone", 2, false).Close()
	carol := e.device(t, "carol", "c-phone", 3, false)
	if err := carol.MuteConversation(ctx10(t), conv, true); err != nil {
		t.Fatal(err)
	}
	carol.Close()
	dave := e.device(t, "dave", "d-phone", 4, false)
	if err := dave.Block(ctx10(t), "alice"); err != nil {
		t.Fatal(err)
	}
	dave.Close()
	alice, _ := e.connect(t, "alice", "a-web", "web", transports[0])
	if _, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "m1", ConversationId: conv, ContentType: "text", Payload: []byte("standup")}); err != nil {
		t.Fatal(err)
	}
	got := e.waitNotes(t, 2, 1)[0]
	if got.Payload.Aps.Alert.Title != "alice in team" || got.Payload.Aps.Alert.Body != "standup" {
		t.Errorf("bob's alert = %+v, want alice in team / standup", got.Payload.Aps.Alert)
	}
	e.waitNotes(t, 1, 0) // sender
	e.waitNotes(t, 3, 0) // muted
	e.waitNotes(t, 4, 0) // blocked
}

// TestPushInvalidTargetRemoved: a token the platform reports unregistered
// is removed at once and not retried; a 500 is retried until it succeeds.
func TestPushInvalidTargetRemoved(t *testing.T) {
	e := startPushServer(t, nil)
	e.device(t, "bob", "phone", 1, false).Close()
	e.device(t, "carol", "phone", 2, false).Close()
	e.apns.Answer(apnsToken(1), http.StatusGone, "Unregistered", "")
	e.apns.Answer(apnsToken(2), http.StatusInternalServerError, "InternalServerError", "")
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0])
	for _, to := range []string{"bob", "carol"} {
		if _, err := alice.SendText(ctx10(t), to, "ping"); err != nil {
			t.Fatal(err)
		}
	}
	admin := adminClient(e.testServer)
	deadline := time.Now().Add(10 * time.Second)
	for {
		devs, err := admin.PushDevices(ctx10(t), "bob")
		if err == nil && len(devs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's unregistered target still listed: %+v, %v", devs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitNotes(t, 1, 0)
	// Carol's first attempt got a 500; the retry (after about a second) got through.
	e.waitNotes(t, 2, 1)
	devs, err := admin.PushDevices(ctx10(t), "carol")
	if err != nil || len(devs) != 1 || len(devs[0].Log) != 2 || devs[0].Log[0].Outcome != "sent" ||
		devs[0].Log[1].Outcome != "retrying" || devs[0].Log[1].Status != 500 {
		t.Fatalf("carol's log = %+v, %v; want retrying (500) then sent", devs, err)
	}
}

// TestPushBurstLargerThanQueue: one message to a group with more offline
// members than the platform's queue holds, to a platform slower than the
// server decides, notifies every member once: a burst waits for room in
// the queue instead of being dropped, and so does a retry made while the
// queue is still full.
func TestPushBurstLargerThanQueue(t *testing.T) {
	const members = 120
	e := startPushServer(t, func(c *server.Config) { c.PushQueue, c.PushWorkers = 10, 2 })
	admin := adminClient(e.testServer)
	var ids []string
	for i := 1; i <= members; i++ {
		uid := fmt.Sprintf("m%03d", i)
		ids = append(ids, uid)
		// The app server registers its users' devices itself.
		if err := admin.RegisterPush(ctx10(t), uid, &pb.RegisterPush{DeviceId: "phone",
			Target: &pb.RegisterPush_Apns{Apns: &pb.ApnsTarget{DeviceToken: apnsToken(i), Topic: pushTopic}}}); err != nil {
			t.Fatalf("RegisterPush %s: %v", uid, err)
		}
		if i == 1 {
			// The first attempt fails; its retry comes 1-1.5 s later, while the burst still fills the queue.
			e.apns.Answer(apnsToken(i), http.StatusServiceUnavailable, "ServiceUnavailable", "")
		} else {
			e.apns.Stall(apnsToken(i), 40*time.Millisecond) // 2 workers: about 50 a second
		}
	}
	g, err := admin.CreateGroup(ctx10(t), client.GroupSpec{Owner: "alice", Name: "all hands", UserIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0])
	if _, err := alice.Send(ctx10(t), &pb.Send{ConversationId: g.ConversationId, ContentType: "text", Payload: []byte("standup in 5")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.apns.Count() < members && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for i := 1; i <= members; i++ {
		if got := e.notes(i); len(got) != 1 {
			t.Errorf("%s got %d notifications, want 1", ids[i-1], len(got))
		}
	}
	_, body := adminGet(t, e.httpBase+"/metrics")
	if want := `parley_push_failed_total{kind="apns",reason="queue_full"} 0`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s: notifications were dropped", want)
	}
}

// TestPushTargetsRemoved: logging out with the registering token, a
// password change and a kick by another device of the same type remove
// targets; unregistering too; the same device signing in again keeps its.
func TestPushTargetsRemoved(t *testing.T) {
	e := startPushServer(t, nil)
	admin := adminClient(e.testServer)
	targets := func(uid string) []string {
		t.Helper()
		devs, err := admin.PushDevices(ctx10(t), uid)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range devs {
			ids = append(ids, d.DeviceID)
		}
		return ids
	}
	waitTargets := func(uid string, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for strings.Join(targets(uid), ",") != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s's targets = %v, want [%s]", uid, targets(uid), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Logout with the token that registered removes only that token's target.
	tok := e.mint(t, "bob")
	c, _, err := dialRecorded(t, client.Options{Addr: e.wsURL, Token: tok, DeviceID: "b-ios", DeviceType: "ios"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterAPNs(ctx10(t), apnsToken(1), pushTopic, false); err != nil {
		t.Fatal(err)
	}
	e.device(t, "bob", "b-android", 2, false)
	waitTargets("bob", "b-android,b-ios")
	if code, body := httpDo(t, "POST", e.httpBase+"/v1/logout", bearer(tok), nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %s", code, body)
	}
	waitTargets("bob", "b-android")

	// Unregister.
	c2 := e.device(t, "bob", "b-web", 3, false)
	if err := c2.UnregisterPush(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	waitTargets("bob", "b-android")

	// A newer login of another device of the same type (kick) removes the
	// old device's; the same device logging in again keeps its own.
	e.device(t, "carol", "c-ios-1", 4, false)
	waitTargets("carol", "c-ios-1")
	if _, _, err := dialRecorded(t, client.Options{Addr: e.wsURL, Token: e.mint(t, "carol"), DeviceID: "c-ios-1", DeviceType: "c-ios-1"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	waitTargets("carol", "c-ios-1")
	if _, _, err := dialRecorded(t, client.Options{Addr: e.wsURL, Token: e.mint(t, "carol"), DeviceID: "c-ios-2", DeviceType: "c-ios-1"}); err != nil {
		t.Fatal(err)
	}
	waitTargets("carol", "")

	// Revoking every token (as a password change does) removes them all.
	if _, err := admin.RevokeTokens(ctx10(t), "bob"); err != nil {
		t.Fatal(err)
	}
	waitTargets("bob", "")
}

// TestRegisterPushBadInput: malformed targets and devices are refused with
// BAD_REQUEST; over POST /v1/rpc the device must be named; a 21st device
// is refused.
func TestRegisterPushBadInput(t *testing.T) {
	e := startPushServer(t, nil)
	c, _ := e.connect(t, "bob", "b1", "web", transports[0])
	bad := []*pb.RegisterPush{
		{},
		{Target: &pb.RegisterPush_Apns{Apns: &pb.ApnsTarget{DeviceToken: "zz", Topic: pushTopic}}},
		{Target: &pb.RegisterPush_Apns{Apns: &pb.ApnsTarget{DeviceToken: apnsToken(1)}}},
		{Target: &pb.RegisterPush_Fcm{Fcm: &pb.FcmTarget{Token: "has space"}}}, // FCM is not configured either
		{Target: &pb.RegisterPush_Webpush{Webpush: &pb.WebPushTarget{Endpoint: "http://push.example/x", P256Dh: "AAAA", Auth: "AAAA"}}},
		{DeviceId: "other-device", Target: &pb.RegisterPush_Apns{Apns: &pb.ApnsTarget{DeviceToken: apnsToken(1), Topic: pushTopic}}},
	}
	for i, r := range bad {
		if err := c.RegisterPush(ctx10(t), r); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
			t.Errorf("case %d: %v, want BAD_REQUEST", i, err)
		}
	}
	tok := e.mint(t, "bob")
	rpc := func(frame string) (int, string) {
		code, body := httpDo(t, "POST", e.httpBase+"/v1/rpc", bearer(tok), []byte(frame))
		return code, string(body)
	}
	apns := fmt.Sprintf(`"apns":{"deviceToken":%q,"topic":%q}`, apnsToken(1), pushTopic)
	if code, body := rpc(`{"registerPush":{` + apns + `}}`); code != http.StatusBadRequest {
		t.Errorf("rpc without deviceId: %d %s, want 400", code, body)
	}
	for i := range 20 {
		if code, body := rpc(fmt.Sprintf(`{"registerPush":{"deviceId":"d%d",%s}}`, i, apns)); code != http.StatusOK {
			t.Fatalf("rpc register d%d: %d %s", i, code, body)
		}
	}
	if code, body := rpc(`{"registerPush":{"deviceId":"d20",` + apns + `}}`); code != http.StatusTooManyRequests && !strings.Contains(body, "quota") {
		t.Errorf("21st device: %d %s, want the quota refusal", code, body)
	}
	if code, body := rpc(`{"registerPush":{"deviceId":"d3",` + apns + `}}`); code != http.StatusOK {
		t.Errorf("re-registering a known device at the cap: %d %s", code, body)
	}
	if code, body := rpc(`{"unregisterPush":{"deviceId":"d3"}}`); code != http.StatusOK {
		t.Errorf("rpc unregister: %d %s", code, body)
	}
}

// TestMessageOfflineWebhook: with message.offline asked for, a window's
// recipients who were not reached are named, with their due devices; a
// recipient online and acknowledging is not.
func TestMessageOfflineWebhook(t *testing.T) {
	var mu sync.Mutex
	var events []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Events []map[string]any `json:"events"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err == nil {
			mu.Lock()
			events = append(events, body.Events...)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	e := startPushServer(t, func(c *server.Config) {
		c.WebhookURLs, c.WebhookEvents = []string{hook.URL}, []string{"message.offline"}
		// A group member's delivered cursor is written within a second
		// (chat's groupDeliveredFlushTicks): the delay must be longer.
		c.PushDelay = 1500 * time.Millisecond
	})
	admin := adminClient(e.testServer)
	g, err := admin.CreateGroup(ctx10(t), client.GroupSpec{Name: "team", Owner: "alice", UserIDs: []string{"bob", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	e.device(t, "bob", "b-phone", 1, false).Close()                                                          // target, offline
	if _, _, err := dialRecorded(t, client.Options{Addr: e.wsURL, Token: e.mint(t, "carol"), DeviceID: "c1", // online, acks
		DeviceType: "web", AutoDeliveredAck: true}); err != nil {
		t.Fatal(err)
	}
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0]) // dave: no target, offline
	if _, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "m1", ConversationId: g.ConversationId, ContentType: "text", Payload: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 {
		t.Fatalf("events = %v, want one message.offline", events)
	}
	// Recipients come in the group's member order, which is not sorted.
	recs, _ := events[0]["recipients"].([]any)
	sort.Slice(recs, func(i, j int) bool {
		return fmt.Sprint(recs[i].(map[string]any)["user_id"]) < fmt.Sprint(recs[j].(map[string]any)["user_id"])
	})
	b, _ := json.Marshal(recs)
	if events[0]["type"] != "message.offline" || events[0]["conversation_id"] != g.ConversationId ||
		string(b) != `[{"device_ids":["b-phone"],"user_id":"bob"},{"device_ids":[],"user_id":"dave"}]` {
		t.Fatalf("event = %v (recipients %s)", events[0], b)
	}
}

// TestPushTestCommand: the admin test sends one notification to each
// device and reports each platform's answer.
func TestPushTestCommand(t *testing.T) {
	e := startPushServer(t, nil)
	e.device(t, "bob", "phone", 1, false).Close()
	e.device(t, "bob", "tablet", 2, false).Close()
	e.apns.Answer(apnsToken(2), http.StatusBadRequest, "BadDeviceToken", "")
	res, err := adminClient(e.testServer).PushTest(ctx10(t), "bob")
	if err != nil || len(res) != 2 {
		t.Fatalf("PushTest = %+v, %v", res, err)
	}
	if res[0].DeviceID != "phone" || res[0].Outcome != "sent" || res[0].Status != 200 {
		t.Errorf("phone: %+v", res[0])
	}
	if res[1].DeviceID != "tablet" || res[1].Outcome != "removed" || res[1].Reason != "BadDeviceToken" {
		t.Errorf("tablet: %+v", res[1])
	}
	if n := e.notes(1); len(n) != 1 || n[0].Payload.Aps.Alert.Title != "Test notification" {
		t.Errorf("stand-in got %+v", n)
	}
}

// TestPushFCMThroughServer: an Android device registered with FCM gets its
// notification through FCM HTTP v1 (OAuth token exchanged once), and an
// UNREGISTERED answer removes the target.
func TestPushFCMThroughServer(t *testing.T) {
	fcm, err := standin.NewFCM("parley-test")
	if err != nil {
		t.Fatal(err)
	}
	defer fcm.Close()
	creds := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(creds, fcm.CredentialsJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startPushServer(t, func(c *server.Config) {
		c.FCMCredentialsFile, c.FCMEndpoint = creds, fcm.URL()
		server.SetPushClientForTest(c, "fcm", fcm.Client())
	})
	for _, d := range []struct{ uid, token string }{{"bob", "fcm-token-bob"}, {"carol", "fcm-token-carol"}} {
		c, _, err := dialRecorded(t, client.Options{Addr: e.wsURL, Token: e.mint(t, d.uid), DeviceID: "android", DeviceType: "android"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RegisterFCM(ctx10(t), d.token); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	fcm.Answer("fcm-token-carol", http.StatusNotFound, "UNREGISTERED", "")
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0])
	for _, to := range []string{"bob", "carol"} {
		if _, err := alice.SendText(ctx10(t), to, "hello "+to); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(fcm.Notifications()) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	got := fcm.Notifications()
	if len(got) != 1 || got[0].Token != "fcm-token-bob" || got[0].Notification == nil ||
		got[0].Notification.Title != "alice" || got[0].Notification.Body != "hello bob" || got[0].Data["seq"] != "1" {
		t.Fatalf("FCM got %+v", got)
	}
	if n := fcm.TokenRequests(); n != 1 {
		t.Errorf("%d OAuth token exchanges, want 1 (cached)", n)
	}
	if v := fcm.Violations(); len(v) > 0 {
		t.Errorf("FCM stand-in saw bad requests: %q", v)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		devs, err := adminClient(e.testServer).PushDevices(ctx10(t), "carol")
		if err == nil && len(devs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol's unregistered FCM target: %+v, %v", devs, err)
		}
	}
}

// TestPushWebPushThroughServer: a browser subscribed with the server's
// VAPID key (GET /v1/push/webpush-key) gets the notification encrypted for
// it (the stand-in decrypts it with the subscription's private key) with
// the payload the service worker reads.
func TestPushWebPushThroughServer(t *testing.T) {
	// The first server generates its VAPID key pair and serves the key.
	e := startPushServer(t, func(c *server.Config) { c.WebPushAllowPrivate = true })
	code, body := httpDo(t, "GET", e.httpBase+"/v1/push/webpush-key", nil, nil)
	var key struct {
		PublicKey string `json:"publicKey"`
	}
	if err := json.Unmarshal(body, &key); code != http.StatusOK || err != nil || key.PublicKey == "" {
		t.Fatalf("webpush-key: %d %s", code, body)
	}
	wp, err := standin.NewWebPush(key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Close()
	// A server with that key pair configured (as a cluster's nodes are),
	// whose Web Push client trusts the stand-in.
	e2 := startPushServer(t, func(c *server.Config) {
		c.WebPushAllowPrivate = true
		c.WebPushVAPIDPublicKey, c.WebPushVAPIDPrivateKey = key.PublicKey, vapidPrivateOf(t, e.cfg.DataDir)
		server.SetPushClientForTest(c, "webpush", wp.Client())
	})
	sub, err := wp.NewSubscription()
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := dialRecorded(t, client.Options{Addr: e2.wsURL, Token: e2.mint(t, "bob"), DeviceID: "browser", DeviceType: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWebPush(ctx10(t), sub.Endpoint, sub.P256dh, sub.Auth); err != nil {
		t.Fatal(err)
	}
	c.Close()
	alice, _ := e2.connect(t, "alice", "a1", "web", transports[0])
	ack, err := alice.SendText(ctx10(t), "bob", "see you at 8")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(wp.Notifications()) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := wp.Notifications()
	if len(got) != 1 {
		t.Fatalf("Web Push got %d notifications", len(got))
	}
	var payload map[string]any
	if err := json.Unmarshal(got[0].Plaintext, &payload); err != nil {
		t.Fatalf("payload %q: %v", got[0].Plaintext, err)
	}
	if payload["title"] != "alice" || payload["body"] != "see you at 8" || payload["conversationId"] != ack.ConversationId ||
		payload["seq"] != "1" || got[0].Urgency != "high" || got[0].TTL <= 0 || got[0].Topic == "" {
		t.Fatalf("Web Push message %+v, payload %v", got[0], payload)
	}
	if v := wp.Violations(); len(v) > 0 {
		t.Errorf("Web Push stand-in saw bad requests: %q", v)
	}
}

// vapidPrivateOf reads the VAPID private key a server generated into dir.
func vapidPrivateOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "secrets.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Private string `json:"vapid_private_key"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Private == "" {
		t.Fatalf("secrets.json: %v", err)
	}
	return s.Private
}

// pushChildEnv, when set, makes the test binary run a server that sends FCM
// notifications as the JSON config in it says (see runPushChild).
const pushChildEnv = "PARLEY_TEST_PUSH_CHILD"

type pushChildConfig struct {
	Dir, Credentials, Endpoint, CA string
	Delay                          time.Duration
}

func runPushChild(js string) {
	var c pushChildConfig
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	serveChild(server.Config{
		DataDir: c.Dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0", AdminAPIKeys: []string{testAPIKey},
		FCMCredentialsFile: c.Credentials, FCMEndpoint: c.Endpoint, PushCAFile: c.CA, PushDelay: c.Delay,
	})
}

// TestKill9BeforePushDelay proves what docs/push.md promises about a crash:
// the notification of a message stored in the push_delay before a kill -9
// is not sent (it was only in memory), but the message itself is kept, the
// device's target too, and the next message after the restart is notified
// as usual.
func TestKill9BeforePushDelay(t *testing.T) {
	p, err := bench.StartPushProvider(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	js, _ := json.Marshal(pushChildConfig{Dir: t.TempDir(), Credentials: p.CredentialsFile(), Endpoint: p.Endpoint(),
		CA: p.CAFile(), Delay: 2 * time.Second})
	env := pushChildEnv + "=" + string(js)
	ch := spawnChild(t, env)
	ctx := ctx10(t)
	admin := client.NewAdmin(ch.httpBase, testAPIKey)
	if err := admin.RegisterPush(ctx, "bob", &pb.RegisterPush{DeviceId: "phone",
		Target: &pb.RegisterPush_Fcm{Fcm: &pb.FcmTarget{Token: "fcm-bob"}}}); err != nil {
		t.Fatal(err)
	}
	send := func(ch *child, text string) *pb.SendAck {
		t.Helper()
		tok, err := client.MintToken(ctx, ch.httpBase, testAPIKey, "alice", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		alice, err := client.Dial(ctx, client.Options{Addr: ch.tcp, Token: tok.Token, DeviceID: "a1", DeviceType: "web"})
		if err != nil {
			t.Fatal(err)
		}
		defer alice.Close()
		ack, err := alice.SendText(ctx, "bob", text)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	first := send(ch, "before the crash")
	ch.kill9(t) // well inside push_delay: the notification was still waiting
	if n := p.FCM.Count(); n != 0 {
		t.Fatalf("%d notifications before push_delay was over", n)
	}

	ch = spawnChild(t, env)
	time.Sleep(3 * time.Second) // past push_delay after the restart: nothing of the first message comes
	if n := p.FCM.Count(); n != 0 {
		t.Fatalf("%d notifications for the message stored before the crash; docs/push.md says none", n)
	}
	p.FCM.SetKeep(10) // the stand-in of the bench keeps none
	second := send(ch, "after the restart")
	var got []standin.FCMMessage
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = p.FCM.Notifications(); len(got) > 0 {
			break
		}
	}
	if len(got) != 1 || got[0].Token != "fcm-bob" || got[0].Data["seq"] != fmt.Sprint(second.Seq) || got[0].Notification.Body != "after the restart" {
		t.Fatalf("after the restart the stand-in got %+v; want one notification of seq %d", got, second.Seq)
	}
	// The message of the lost notification is there for bob's next sync.
	tok, err := client.MintToken(ctx, ch.httpBase, testAPIKey, "bob", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := client.Dial(ctx, client.Options{Addr: ch.tcp, Token: tok.Token, DeviceID: "phone", DeviceType: "ios"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	page, err := bob.SyncMessages(ctx, first.ConversationId, 0, 10)
	if err != nil || len(page.Messages) != 2 || string(page.Messages[0].Payload) != "before the crash" {
		t.Fatalf("bob's sync after the restart: %v, %v", page, err)
	}
}

// TestPushBadgeIsTheUnreadCount: the badge is the sum of the unread counts
// the user's conversation list shows: messages from others, not the user's
// own, not group events (a "members added" event naming many users), not
// recalled messages, nothing read or cleared.
func TestPushBadgeIsTheUnreadCount(t *testing.T) {
	e := startPushServer(t, nil)
	phone := e.device(t, "bob", "phone", 1, false)
	phone.Close()
	ctx := ctx10(t)
	alice, _ := e.connect(t, "alice", "a1", "web", transports[0])
	bob, _ := e.connect(t, "bob", "b1", "web", transports[0])
	carol, _ := e.connect(t, "carol", "c1", "web", transports[0])
	dave, _ := e.connect(t, "dave", "d1", "web", transports[0])
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// 1:1 with alice: one of bob's own (sending reads what came before),
	// then two from her.
	must(bob.SendText(ctx, "alice", "mine"))
	must(alice.SendText(ctx, "bob", "one"))
	must(alice.SendText(ctx, "bob", "two"))
	// A group of 200 (its events name them all): three from carol, one recalled.
	members := []string{"alice", "bob", "dave"}
	for i := range 197 {
		members = append(members, fmt.Sprintf("member-%03d", i))
	}
	g1, err := carol.CreateGroup(ctx, &pb.CreateGroup{Name: "big", UserIds: members})
	if err != nil {
		t.Fatal(err)
	}
	var last *pb.SendAck
	for _, text := range []string{"a", "b", "c"} {
		last, err = carol.SendToConversation(ctx, g1.ConversationId, "text", []byte(text))
		must(last, err)
	}
	must(carol.Recall(ctx, g1.ConversationId, last.Seq))
	// A group bob has read.
	g2, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "read", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	must(alice.SendToConversation(ctx, g2.ConversationId, "text", []byte("x")))
	read, err := alice.SendToConversation(ctx, g2.ConversationId, "text", []byte("y"))
	must(read, err)
	if err := bob.MarkRead(ctx, g2.ConversationId, read.Seq); err != nil {
		t.Fatal(err)
	}
	// A conversation bob cleared.
	cleared, err := dave.SendText(ctx, "bob", "old news")
	must(cleared, err)
	if err := bob.ClearConversation(ctx, cleared.ConversationId); err != nil {
		t.Fatal(err)
	}

	// Once the notifications of all that are out (past push_delay and the
	// coalescing window), alice's next message gets one of its own.
	before := len(e.notes(1))
	for quiet := time.Now(); time.Since(quiet) < 2*time.Second; time.Sleep(50 * time.Millisecond) {
		if n := len(e.notes(1)); n != before {
			before, quiet = n, time.Now()
		}
	}
	final, err := alice.SendText(ctx, "bob", "three")
	must(final, err)
	note := e.waitNotes(t, 1, before+1)[before]
	if note.Payload.ConversationID != final.ConversationId || note.Payload.Seq != fmt.Sprint(final.Seq) {
		t.Fatalf("last notification is of %s/%s, want alice's last message %s/%d", note.Payload.ConversationID,
			note.Payload.Seq, final.ConversationId, final.Seq)
	}
	list, err := bob.Conversations(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, c := range list.Conversations {
		sum += int(c.UnreadCount)
	}
	if sum != 5 {
		t.Errorf("conversation list unread counts sum to %d, want 5 (3 from alice, 2 in the group): %v", sum, list)
	}
	if note.Payload.Aps.Badge == nil || *note.Payload.Aps.Badge != sum {
		t.Errorf("badge = %v, want the conversation list's %d", note.Payload.Aps.Badge, sum)
	}
}

// TestPushBadgesOfGroupMembers: one message to a group notifies each
// offline member with their own badge, though the members' counts are
// worked out together (those who read up to the same message share what
// is read of the conversation): bob and dave have read nothing, erin read
// the first message, and bob has a 1:1 message too.
func TestPushBadgesOfGroupMembers(t *testing.T) {
	e := startPushServer(t, nil)
	for i, uid := range []string{"bob", "dave", "erin"} {
		e.device(t, uid, "phone", i+1, false).Close()
	}
	ctx := ctx10(t)
	carol, _ := e.connect(t, "carol", "c1", "web", transports[0])
	erin, _ := e.connect(t, "erin", "e1", "web", transports[0])
	g, err := carol.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob", "dave", "erin"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := carol.SendToConversation(ctx, g.ConversationId, "text", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	if err := erin.MarkRead(ctx, g.ConversationId, first.Seq); err != nil {
		t.Fatal(err)
	}
	erin.Close()
	if _, err := carol.SendText(ctx, "bob", "direct"); err != nil {
		t.Fatal(err)
	}
	// Wait out the windows of all that, then one more group message.
	counts := func() [3]int { return [3]int{len(e.notes(1)), len(e.notes(2)), len(e.notes(3))} }
	before := counts()
	for quiet := time.Now(); time.Since(quiet) < 2*time.Second; time.Sleep(50 * time.Millisecond) {
		if c := counts(); c != before {
			before, quiet = c, time.Now()
		}
	}
	if _, err := carol.SendToConversation(ctx, g.ConversationId, "text", []byte("second")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{3, 2, 1} { // bob: 2 in the group + 1 direct; dave: 2; erin: 1
		notes := e.waitNotes(t, i+1, before[i]+1)
		if b := notes[before[i]].Payload.Aps.Badge; b == nil || *b != want {
			t.Errorf("device %d: badge %v, want %d", i+1, b, want)
		}
	}
}

// TestPushMentionsAndThreads: a muted conversation still pushes the
// messages that mention the user; a thread reply pushes those who take
// part in the thread and those it mentions, not every member.
func TestPushMentionsAndThreads(t *testing.T) {
	e := startPushServer(t, nil)
	admin := adminClient(e.testServer)
	g, err := admin.CreateGroup(ctx10(t), client.GroupSpec{Name: "team", Owner: "alice", UserIDs: []string{"bob", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	alice, _ := e.connect(t, "alice", "a-web", "web", transports[0])
	root, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "root", ConversationId: conv, ContentType: "text", Payload: []byte("plan")})
	if err != nil {
		t.Fatal(err)
	}
	bob := e.device(t, "bob", "b-phone", 2, true)
	if err := bob.MuteConversation(ctx10(t), conv, true); err != nil {
		t.Fatal(err)
	}
	bob.Close()
	e.device(t, "carol", "c-phone", 3, true).Close()
	e.device(t, "dave", "d-phone", 4, true).Close()
	e.device(t, "alice", "a-phone", 1, true).Close()

	// Muted bob is pushed only the message that mentions him.
	if _, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "plain", ConversationId: conv, ContentType: "text", Payload: []byte("lunch?")}); err != nil {
		t.Fatal(err)
	}
	e.waitNotes(t, 3, 1) // carol: the plain message
	if _, err := alice.Send(ctx10(t), &pb.Send{ClientMsgId: "ping-bob", ConversationId: conv, ContentType: "text",
		Payload: []byte("@bob review please"), Mentions: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	got := e.waitNotes(t, 2, 1)
	if got[0].Payload.Aps.Alert.Body != "@bob review please" {
		t.Fatalf("bob (muted) was pushed %q, want the mention", got[0].Payload.Aps.Alert.Body)
	}

	// Carol replies in alice's thread: alice (the root's author) is pushed,
	// dave (not in it, not mentioned) is not.
	carol, _ := e.connect(t, "carol", "c-web", "web", transports[1])
	if _, err := carol.Send(ctx10(t), &pb.Send{ClientMsgId: "t1", ConversationId: conv, ContentType: "text",
		Payload: []byte("in thread"), ThreadRoot: root.Seq}); err != nil {
		t.Fatal(err)
	}
	e.waitNotes(t, 1, 1)
	dave := e.waitNotes(t, 4, 2) // the plain message and the mention of bob; not the thread reply
	for _, n := range dave {
		if n.Payload.Aps.Alert.Body == "in thread" {
			t.Fatal("dave, who takes no part in the thread, was pushed its reply")
		}
	}
}
