package server_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// MLS bytes as an MLS library sends them (RFC 9420 section 6): the server
// reads only their framing, so the tests build that framing around opaque
// content. Lengths are variable-size vectors (section 2.1.2).

func mlsVec(b []byte) []byte {
	n := len(b)
	var out []byte
	switch {
	case n < 64:
		out = []byte{byte(n)}
	case n < 16384:
		out = binary.BigEndian.AppendUint16(nil, uint16(n)|0x4000)
	default:
		out = binary.BigEndian.AppendUint32(nil, uint32(n)|0x80000000)
	}
	return append(out, b...)
}

func mlsHeader(wire uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 1), wire)
}

// mlsPrivate is an MLSMessage carrying a PrivateMessage.
func mlsPrivate(group string, epoch uint64, contentType byte, ciphertext []byte) []byte {
	b := append(mlsHeader(2), mlsVec([]byte(group))...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, contentType)
	b = append(b, mlsVec(nil)...)                   // authenticated_data
	b = append(b, mlsVec([]byte("sender-data"))...) // encrypted_sender_data
	return append(b, mlsVec(ciphertext)...)
}

// mlsPublicCommit is an MLSMessage carrying a PublicMessage Commit by the
// member at leaf.
func mlsPublicCommit(group string, epoch uint64, leaf uint32, tag string) []byte {
	b := append(mlsHeader(1), mlsVec([]byte(group))...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, 1) // sender: member
	b = binary.BigEndian.AppendUint32(b, leaf)
	b = append(b, mlsVec(nil)...) // authenticated_data
	b = append(b, 3)              // commit
	return append(b, mlsVec([]byte("commit-body-"+tag))...)
}

func mlsKeyPackage(tag string) []byte {
	b := append(mlsHeader(5), 0, 1, 0, 1) // version mls10, cipher suite 1
	b = append(b, mlsVec([]byte("init-key-"+tag))...)
	return append(b, mlsVec([]byte("leaf-node-extensions-signature"))...)
}

func mlsWelcome(tag string) []byte {
	b := append(mlsHeader(3), 0, 1)
	b = append(b, mlsVec([]byte("secrets-"+tag))...)
	return append(b, mlsVec([]byte("group-info"))...)
}

// TestE2EEKeyPackages: a device publishes one-time packages and a last
// resort; another user claims one per device, never the same one-time
// package twice, then the last resort; counts follow; a user who blocked
// the claimer answers like one who does not exist; bad packages get clear
// codes.
func TestE2EEKeyPackages(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	phone, _ := ts.connect(t, "alice", "a-phone", "ios", transports[0])
	laptop, _ := ts.connect(t, "alice", "a-laptop", "desktop", transports[1])
	bob, _ := ts.connect(t, "bob", "b1", "web", transports[2])
	n, err := phone.PublishKeyPackages(ctx, [][]byte{mlsKeyPackage("p1"), mlsKeyPackage("p2")}, mlsKeyPackage("p-lr"))
	if err != nil || n.Count != 2 || !n.LastResort {
		t.Fatalf("publish: %v, %v", n, err)
	}
	if n, err := laptop.PublishKeyPackages(ctx, [][]byte{mlsKeyPackage("l1")}, nil); err != nil || n.Count != 1 || n.LastResort {
		t.Fatalf("publish laptop: %v, %v", n, err)
	}
	claim := func(c *client.Client, users ...string) string {
		t.Helper()
		kps, err := c.ClaimKeyPackages(ctx, users...)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		out := ""
		for _, k := range kps {
			out += fmt.Sprintf("%s/%s=%x lr=%v;", k.UserId, k.DeviceId, k.KeyPackage, k.LastResort)
		}
		return out
	}
	want := func(parts ...string) string { return fmt.Sprint(parts) }
	kp := func(dev, tag string, lr bool) string {
		return fmt.Sprintf("alice/%s=%x lr=%v;", dev, mlsKeyPackage(tag), lr)
	}
	if got := claim(bob, "alice"); want(got) != want(kp("a-laptop", "l1", false)+kp("a-phone", "p1", false)) {
		t.Fatalf("first claim: %s", got)
	}
	if got := claim(bob, "alice"); want(got) != want(kp("a-phone", "p2", false)) {
		t.Fatalf("second claim: %s", got)
	}
	for range 2 {
		if got := claim(bob, "alice"); want(got) != want(kp("a-phone", "p-lr", true)) {
			t.Fatalf("last-resort claim: %s", got)
		}
	}
	if n, err := phone.CountKeyPackages(ctx); err != nil || n.Count != 0 || !n.LastResort {
		t.Fatalf("count: %v, %v", n, err)
	}
	// Blocked and unknown users answer alike: no packages.
	carol, _ := ts.connect(t, "carol", "c1", "web", transports[0])
	if _, err := carol.PublishKeyPackages(ctx, [][]byte{mlsKeyPackage("c1")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := carol.Block(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if got, none := claim(bob, "carol"), claim(bob, "nobody-at-all"); got != "" || none != "" {
		t.Fatalf("claims of a blocking user %q and of an unknown one %q: want none", got, none)
	}
	if n, _ := carol.CountKeyPackages(ctx); n.Count != 1 {
		t.Fatalf("a refused claim took a package: %d left", n.Count)
	}
	// Bad packages.
	_, err = phone.PublishKeyPackages(ctx, [][]byte{[]byte("garbage")}, nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	_, err = phone.PublishKeyPackages(ctx, [][]byte{mlsPrivate("g:x", 0, 1, []byte("c"))}, nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	big := append(mlsHeader(5), 0, 1, 0, 1)
	big = append(big, mlsVec(make([]byte, 17<<10))...)
	big = append(big, 1)
	_, err = phone.PublishKeyPackages(ctx, [][]byte{big}, nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_TOO_LARGE)
	many := make([][]byte, 101)
	for i := range many {
		many[i] = mlsKeyPackage(fmt.Sprint(i))
	}
	_, err = phone.PublishKeyPackages(ctx, many, nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_TOO_LARGE)
	for range 2 {
		if _, err := phone.PublishKeyPackages(ctx, many[:100], nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = phone.PublishKeyPackages(ctx, many[:1], nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED)
	if n, _ := phone.CountKeyPackages(ctx); n.Count != 200 {
		t.Fatalf("count after the bound: %d, want 200", n.Count)
	}
	// A device that lost its keys replaces everything it published.
	if n, err := phone.ReplaceKeyPackages(ctx, [][]byte{mlsKeyPackage("fresh")}, nil); err != nil || n.Count != 1 || n.LastResort {
		t.Fatalf("replace: %v, %v", n, err)
	}
	if got := claim(bob, "alice"); want(got) != want(kp("a-phone", "fresh", false)) {
		t.Fatalf("claim after replace: %s", got)
	}
}

// claimRace has claimers claim one user's packages at once, through the
// nodes given in turn, and checks that no one-time package was handed out
// twice and that all of them were handed out.
func claimRace(t *testing.T, nodes []*testServer, perDevice int) {
	ctx := ctx10(t)
	var owners []*client.Client
	for i, dev := range []string{"d-ios", "d-web"} {
		c, _ := nodes[i%len(nodes)].connect(t, "dave", dev, dev, transports[0])
		owners = append(owners, c)
		pkgs := make([][]byte, perDevice)
		for j := range pkgs {
			pkgs[j] = mlsKeyPackage(fmt.Sprintf("%s-%d", dev, j))
		}
		if _, err := c.PublishKeyPackages(ctx, pkgs, mlsKeyPackage(dev+"-lr")); err != nil {
			t.Fatal(err)
		}
	}
	const claimers = 6
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range claimers {
		c, _ := nodes[i%len(nodes)].connect(t, fmt.Sprintf("claimer%d", i), "c", "web", transports[i%len(transports)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perDevice/claimers + 2 {
				kps, err := c.ClaimKeyPackages(ctx, "dave")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, k := range kps {
					if !k.LastResort {
						seen[string(k.KeyPackage)]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("key package %q handed out %d times", k, n)
		}
	}
	if len(seen) != 2*perDevice {
		t.Errorf("%d one-time packages handed out, want %d", len(seen), 2*perDevice)
	}
	for _, c := range owners {
		if n, err := c.CountKeyPackages(ctx); err != nil || n.Count != 0 {
			t.Errorf("count after the race: %v, %v", n, err)
		}
	}
}

// TestE2EEConcurrentClaims: claims racing on one server never hand out a
// one-time package twice.
func TestE2EEConcurrentClaims(t *testing.T) {
	t.Parallel()
	claimRace(t, []*testServer{startServer(t, nil)}, 60)
}

// TestE2EEClusterClaimsAndCommits: the same across two nodes on one
// PostgreSQL database; and Commits of one epoch sent through both nodes at
// once: one wins.
func TestE2EEClusterClaimsAndCommits(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	claimRace(t, nodes, 60)
	ctx := ctx10(t)
	alice, _ := nodes[0].connect(t, "alice", "a1", "ios", transports[0])
	bob, _ := nodes[1].connect(t, "bob", "b1", "web", transports[0])
	conv := encryptedGroupWith(t, ctx, alice, "bob")
	racingCommits(t, ctx, conv, alice, bob, 1, 6)
}

// encryptedGroupWith makes an encrypted group of owner and adds users
// with the Commit of epoch 0.
func encryptedGroupWith(t *testing.T, ctx context.Context, owner *client.Client, users ...string) string {
	t.Helper()
	g, err := owner.CreateEncryptedGroup(ctx, &pb.CreateGroup{Name: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Encrypted {
		t.Fatal("CreateEncryptedGroup answered a group not marked encrypted")
	}
	conv := g.ConversationId
	if err := owner.AddMembersMLS(ctx, conv, users, mlsPublicCommit(conv, 0, 0, "add"), mlsWelcome("add")); err != nil {
		t.Fatalf("first Commit: %v", err)
	}
	return conv
}

// racingCommits: for each epoch from `from`, a and b each send a Commit at
// once: exactly one is accepted, the other is refused as stale, and the
// conversation holds one Commit per epoch.
func racingCommits(t *testing.T, ctx context.Context, conv string, a, b *client.Client, from uint64, rounds int) {
	t.Helper()
	for e := from; e < from+uint64(rounds); e++ {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*client.Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.CommitMLS(ctx, conv, mlsPublicCommit(conv, e, uint32(i), fmt.Sprint(i)), nil)
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH) {
				t.Fatalf("epoch %d: %v", e, err)
			}
		}
		if won != 1 {
			t.Fatalf("epoch %d: %d Commits accepted, want 1 (%v)", e, won, errs)
		}
	}
	st, err := a.MLSState(ctx, conv)
	if err != nil || st.Epoch != from+uint64(rounds) {
		t.Fatalf("state after the race: %v, %v", st, err)
	}
	// The sequence holds exactly one Commit per epoch, in epoch order.
	next := uint64(0)
	for _, m := range syncAll(t, a, conv) {
		if m.ContentType != client.MLSContentType || len(m.Payload) < 4 || m.Payload[3] != 1 {
			continue // not a PublicMessage
		}
		var epoch uint64
		g := len(conv) + 1
		epoch = binary.BigEndian.Uint64(m.Payload[4+g:])
		if epoch != next {
			t.Fatalf("Commit of epoch %d at seq %d, want epoch %d", epoch, m.Seq, next)
		}
		next++
	}
	if next != from+uint64(rounds) {
		t.Fatalf("%d Commits in the sequence, want %d", next, from+uint64(rounds))
	}
}

// TestE2EEGroupCommits: the Delivery Service rules of an encrypted group.
func TestE2EEGroupCommits(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "ios", transports[0])
	bob, bobRec := ts.connect(t, "bob", "b1", "web", transports[1])
	g, err := alice.CreateEncryptedGroup(ctx, &pb.CreateGroup{Name: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	if st, err := alice.MLSState(ctx, conv); err != nil || !st.Encrypted || st.Epoch != 0 {
		t.Fatalf("state: %v, %v", st, err)
	}
	// Created with members: refused (they come with the first Commit).
	_, err = alice.CreateEncryptedGroup(ctx, &pb.CreateGroup{Name: "x", UserIds: []string{"bob"}})
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	// A member change without a Commit, or with a bad one.
	wantCode(t, alice.AddMembers(ctx, conv, "bob"), pb.ErrorCode_ERROR_CODE_MLS_REQUIRED)
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"bob"}, []byte("garbage"), nil), pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"bob"}, mlsPublicCommit("g:other", 0, 0, "x"), nil), pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"bob"}, mlsPrivate(conv, 0, 1, []byte("app")), nil), pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"bob"}, mlsPublicCommit(conv, 0, 0, "x"), []byte("not a welcome")), pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"bob"}, mlsPublicCommit(conv, 3, 0, "x"), nil), pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH)
	// The Commit of epoch 0 adds bob; his device gets it with the Welcome.
	commit0, welcome := mlsPublicCommit(conv, 0, 0, "add-bob"), mlsWelcome("bob")
	if err := alice.AddMembersMLS(ctx, conv, []string{"bob"}, commit0, welcome); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the Commit and Welcome adding him", func() bool {
		for _, m := range bobRec.messages() {
			if m.Kind == pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED && bytes.Equal(m.Payload, commit0) &&
				bytes.Equal(m.MlsWelcome, welcome) && m.ContentType == client.MLSContentType {
				return true
			}
		}
		return false
	})
	// Synced too (a device that was offline).
	found := false
	for _, m := range syncAll(t, bob, conv) {
		found = found || bytes.Equal(m.MlsWelcome, welcome)
	}
	if !found {
		t.Fatal("the Welcome is not in bob's sync")
	}
	// Adding only members already in: no change to store a Commit with.
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"bob"}, mlsPublicCommit(conv, 1, 0, "again"), nil), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	// The same Commit again, or another of epoch 0: stale.
	wantCode(t, alice.AddMembersMLS(ctx, conv, []string{"carol"}, commit0, nil), pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH)
	_, err = bob.CommitMLS(ctx, conv, mlsPublicCommit(conv, 0, 1, "late"), nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH)
	devCommit, devWelcome := mlsPublicCommit(conv, 1, 1, "bob's new device"), mlsWelcome("bob-2")
	if _, err := bob.CommitMLS(ctx, conv, devCommit, devWelcome); err != nil {
		t.Fatal(err)
	}
	// A Commit without a membership change is a sequenced MLS_COMMIT: not
	// unread for alice, carrying its Welcome.
	var sawCommit bool
	for _, m := range syncAll(t, alice, conv) {
		if bytes.Equal(m.Payload, devCommit) {
			sawCommit = m.Kind == pb.MessageKind_MESSAGE_KIND_MLS_COMMIT && bytes.Equal(m.MlsWelcome, devWelcome)
		}
	}
	if !sawCommit {
		t.Fatal("the device Commit is not in the sequence as an MLS_COMMIT with its Welcome")
	}
	// Application messages: encrypted, of this group, of a recent epoch.
	if _, err := bob.SendMLS(ctx, conv, mlsPrivate(conv, 2, 1, []byte("ciphertext"))); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.SendMLS(ctx, conv, mlsPrivate(conv, 0, 1, []byte("in flight"))); err != nil {
		t.Fatalf("an application message within the epoch window: %v", err)
	}
	for _, e := range []uint64{2, 3, 4} {
		if _, err := alice.CommitMLS(ctx, conv, mlsPublicCommit(conv, e, 0, "u"), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = bob.SendMLS(ctx, conv, mlsPrivate(conv, 1, 1, []byte("too old")))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH)
	_, err = bob.SendMLS(ctx, conv, mlsPrivate(conv, 9, 1, []byte("future")))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	_, err = bob.SendMLS(ctx, conv, mlsPrivate(conv, 4, 2, []byte("old proposal")))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH)
	if _, err := bob.SendMLS(ctx, conv, mlsPrivate(conv, 5, 2, []byte("proposal"))); err != nil {
		t.Fatal(err)
	}
	_, err = bob.SendMLS(ctx, conv, mlsPrivate("g:elsewhere", 5, 1, []byte("x")))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	_, err = bob.SendMLS(ctx, conv, []byte{0, 1, 0, 2, 0xff})
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	_, err = bob.SendMLS(ctx, conv, mlsPublicCommit(conv, 5, 1, "commit by send"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	// Plaintext in any form is refused.
	_, err = bob.SendToConversation(ctx, conv, "text", []byte("hello"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_REQUIRED)
	_, err = bob.Send(ctx, &pb.Send{ConversationId: conv, ContentType: client.MLSContentType,
		Payload: mlsPrivate(conv, 5, 1, []byte("c")), SearchText: "hello"})
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	ack, err := bob.SendMLS(ctx, conv, mlsPrivate(conv, 5, 1, []byte("to edit")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Edit(ctx, conv, ack.Seq, "text", []byte("plain edit"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_REQUIRED)
	if _, err := bob.Edit(ctx, conv, ack.Seq, client.MLSContentType, mlsPrivate(conv, 5, 1, []byte("edited"))); err != nil {
		t.Fatalf("an encrypted edit: %v", err)
	}
	// Recall still works (a tombstone).
	if _, err := bob.Recall(ctx, conv, ack.Seq); err != nil {
		t.Fatalf("recall: %v", err)
	}
	// Removing bob needs a Commit too.
	wantCode(t, alice.RemoveMember(ctx, conv, "bob"), pb.ErrorCode_ERROR_CODE_MLS_REQUIRED)
	if err := alice.RemoveMemberMLS(ctx, conv, "bob", mlsPublicCommit(conv, 5, 0, "remove-bob")); err != nil {
		t.Fatal(err)
	}
	if st, _ := alice.MLSState(ctx, conv); st.Epoch != 6 {
		t.Fatalf("epoch after the removal: %d, want 6", st.Epoch)
	}
	_, err = bob.SendMLS(ctx, conv, mlsPrivate(conv, 6, 1, []byte("after removal")))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)

	// A group that is not encrypted takes no MLS.
	plain, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "plain", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Encrypted {
		t.Fatal("a plain group marked encrypted")
	}
	_, err = alice.CommitMLS(ctx, plain.ConversationId, mlsPublicCommit(plain.ConversationId, 0, 0, "x"), nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	_, err = alice.SendMLS(ctx, plain.ConversationId, mlsPrivate(plain.ConversationId, 0, 1, []byte("x")))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	wantCode(t, alice.AddMembersMLS(ctx, plain.ConversationId, []string{"carol"}, mlsPublicCommit(plain.ConversationId, 0, 0, "x"), nil),
		pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	if st, err := alice.MLSState(ctx, plain.ConversationId); err != nil || st.Encrypted {
		t.Fatalf("plain group's state: %v, %v", st, err)
	}
}

// TestE2EERacingCommits: two devices commit in the same epoch at once,
// round after round: one wins each time.
func TestE2EERacingCommits(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "ios", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "web", transports[2])
	conv := encryptedGroupWith(t, ctx, alice, "bob")
	racingCommits(t, ctx, conv, alice, bob, 1, 20)
}

// TestE2EENoPlaintextStored: what members of an encrypted group type never
// reaches the store: plaintext sends, search text and plaintext edits are
// refused, and the raw store files hold only the ciphertext. A plain
// group's message, written alongside, is found by the same scan.
func TestE2EENoPlaintextStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "ios", transports[0])
	conv := encryptedGroupWith(t, ctx, alice, "bob")
	secret := []byte("attack at dawn: the-plaintext-marker-7f3a")
	key := make([]byte, 32)
	rand.Read(key)
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, aead.NonceSize())
	sealed := aead.Seal(nil, nonce, secret, nil) // stands in for the MLS library's encryption
	if _, err := alice.SendMLS(ctx, conv, mlsPrivate(conv, 1, 1, sealed)); err != nil {
		t.Fatal(err)
	}
	_, err := alice.SendToConversation(ctx, conv, "text", secret)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MLS_REQUIRED)
	_, err = alice.Send(ctx, &pb.Send{ConversationId: conv, ContentType: client.MLSContentType,
		Payload: mlsPrivate(conv, 1, 1, sealed), SearchText: string(secret)})
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	control := []byte("a plain group's words: control-marker-19c2")
	plain, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "plain", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SendToConversation(ctx, plain.ConversationId, "text", control); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	ts.Shutdown(sctx)
	var foundSecret, foundSealed, foundControl bool
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		foundSecret = foundSecret || bytes.Contains(b, secret)
		foundSealed = foundSealed || bytes.Contains(b, sealed)
		foundControl = foundControl || bytes.Contains(b, control)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !foundControl || !foundSealed {
		t.Fatalf("the scan does not see stored payloads (control %v, ciphertext %v)", foundControl, foundSealed)
	}
	if foundSecret {
		t.Fatal("the plaintext of an encrypted group's message is in the store files")
	}
}

// TestE2EEAuthorization: against an encrypted group, every conversation
// request of a stranger is refused exactly as against a missing group (no
// hint of the group, nor of its encryption); the key package frames act
// on the caller's own device only.
func TestE2EEAuthorization(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	owner, _ := ts.connect(t, "owner", "o1", "ios", transports[0])
	conv := encryptedGroupWith(t, ctx, owner, "bob")
	missing := "g:0123456789abcdef"
	denied := pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED.String()
	for _, tc := range transports {
		stranger, _ := ts.connect(t, "stranger", "s-"+tc.name, tc.name, tc)
		for _, target := range []string{conv, missing} {
			for name, f := range groupRequests(target) {
				if got := code(stranger.Do(ctx, f)); got != denied {
					t.Errorf("%s: stranger's %s on %s: %s, want %s", tc.name, name, target, got, denied)
				}
			}
		}
	}
	// A session without a device (HTTP) has no key packages.
	status, body := rpc(t, ts, ts.mint(t, "owner"), &pb.ClientFrame{Body: &pb.ClientFrame_CountKeyPackages{CountKeyPackages: &pb.CountKeyPackages{}}})
	if status != 400 {
		t.Errorf("CountKeyPackages over HTTP: %d %s, want 400", status, body)
	}
	// Claiming one's own other devices is allowed (adding a new device).
	other, _ := ts.connect(t, "owner", "o2", "web", transports[1])
	if _, err := other.PublishKeyPackages(ctx, [][]byte{mlsKeyPackage("o2")}, nil); err != nil {
		t.Fatal(err)
	}
	if kps, err := owner.ClaimKeyPackages(ctx, "owner"); err != nil || len(kps) != 1 || kps[0].DeviceId != "o2" {
		t.Fatalf("claiming one's own device: %v, %v", kps, err)
	}
}

// TestE2EEAccountDeletion: deleting an account deletes its devices' key
// packages: none is left in the raw store files.
func TestE2EEAccountDeletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	ctx := ctx10(t)
	creds, err := client.Register(ctx, ts.httpBase, "erin", "a-long-password-1")
	if err != nil {
		t.Fatal(err)
	}
	erin, _ := ts.connectToken(t, creds.Token, "e1", "ios", transports[0])
	kp := mlsKeyPackage("erin-key-package-marker-5d1e")
	if _, err := erin.PublishKeyPackages(ctx, [][]byte{kp}, mlsKeyPackage("erin-last-resort-marker-5d1e")); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient(ts).DeleteUser(ctx, "erin"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion is done", func() bool {
		d, err := adminClient(ts).Deletion(ctx, "erin")
		return err == nil && d.State == "done"
	})
	sctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	ts.Shutdown(sctx)
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte("marker-5d1e")) {
			t.Errorf("a deleted account's key package is still in %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestE2EEShadowMutedCommit: a shadow-muted member's application messages
// reach only them, but their Commits reach everyone: the group's epoch
// moved for all.
func TestE2EEShadowMutedCommit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "ios", transports[0])
	creds, err := client.Register(ctx, ts.httpBase, "mallory", "a-long-password-2")
	if err != nil {
		t.Fatal(err)
	}
	conv := encryptedGroupWith(t, ctx, alice, "mallory")
	if err := adminClient(ts).SetShadowMuted(ctx, "mallory", true); err != nil {
		t.Fatal(err)
	}
	mallory, _ := ts.connectToken(t, creds.Token, "m1", "web", transports[1])
	hidden := mlsPrivate(conv, 1, 1, []byte("spam"))
	if _, err := mallory.SendMLS(ctx, conv, hidden); err != nil {
		t.Fatal(err)
	}
	commit := mlsPublicCommit(conv, 1, 1, "mallory's update")
	if _, err := mallory.CommitMLS(ctx, conv, commit, nil); err != nil {
		t.Fatal(err)
	}
	var sawCommit, sawHidden bool
	for _, m := range syncAll(t, alice, conv) {
		sawCommit = sawCommit || bytes.Equal(m.Payload, commit)
		sawHidden = sawHidden || bytes.Equal(m.Payload, hidden)
	}
	if !sawCommit || sawHidden {
		t.Fatalf("alice sees the Commit: %v (want true), the shadow-muted message: %v (want false)", sawCommit, sawHidden)
	}
}

// TestE2EEAdminAPI: the app's backend cannot put plaintext into an
// encrypted group (a system message is refused) nor add members without a
// Commit; it may remove a member (moderation), as a member may leave: the
// remaining members' devices commit the removal.
func TestE2EEAdminAPI(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "ios", transports[0])
	conv := encryptedGroupWith(t, ctx, alice, "bob", "carol")
	admin := adminClient(ts)
	_, err := admin.Send(ctx, client.Message{ConversationID: conv, ClientMsgID: "sys-1", ContentType: "text", Payload: []byte("system words")})
	if !hasCode(err, 400, "mls_required") {
		t.Fatalf("a system message to an encrypted group: %v, want 400 mls_required", err)
	}
	if err := admin.AddMembers(ctx, conv, []string{"dave"}); !hasCode(err, 400, "mls_required") {
		t.Fatalf("admin add without a Commit: %v, want 400 mls_required", err)
	}
	if err := admin.RemoveMember(ctx, conv, "carol"); err != nil {
		t.Fatalf("admin removal: %v", err)
	}
	// The epoch did not move: the removal's Commit is the members' to make.
	if st, err := alice.MLSState(ctx, conv); err != nil || st.Epoch != 1 {
		t.Fatalf("state after the admin removal: %v, %v", st, err)
	}
	if _, err := alice.CommitMLS(ctx, conv, mlsPublicCommit(conv, 1, 0, "remove carol"), nil); err != nil {
		t.Fatal(err)
	}
}

// An encrypted group says so in the updateGroup reply and its GROUP_UPDATED
// event (what other members' apps refresh their view from), as createGroup
// and getGroup do; a plain group does not.
func TestE2EEGroupInfoSaysEncrypted(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, aliceRec := ts.connect(t, "alice", "a1", "ios", transports[0])
	enc, err := alice.CreateEncryptedGroup(ctx, &pb.CreateGroup{Name: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "open"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		conv string
		want bool
	}{{enc.ConversationId, true}, {plain.ConversationId, false}} {
		name := "renamed " + c.conv
		g, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: c.conv, Name: &name})
		if err != nil {
			t.Fatal(err)
		}
		if g.Name != name || g.Encrypted != c.want {
			t.Fatalf("updateGroup reply for %s: name %q encrypted %v, want encrypted %v", c.conv, g.Name, g.Encrypted, c.want)
		}
		eventually(t, "the GROUP_UPDATED event of "+c.conv, func() bool {
			for _, m := range aliceRec.messages() {
				if m.ConversationId == c.conv && m.Kind == pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED && m.Event.GetGroup().GetName() == name {
					if m.Event.GetGroup().GetEncrypted() != c.want {
						t.Fatalf("GROUP_UPDATED of %s: encrypted %v, want %v", c.conv, m.Event.GetGroup().GetEncrypted(), c.want)
					}
					return true
				}
			}
			return false
		})
	}
	// The conversation list says so too (the web client shows its lock from it).
	list, err := alice.Conversations(ctx, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range list.Conversations {
		switch c.ConversationId {
		case enc.ConversationId, plain.ConversationId:
			seen++
			if want := c.ConversationId == enc.ConversationId; c.Group.GetEncrypted() != want {
				t.Fatalf("conversation list: %s encrypted %v, want %v", c.ConversationId, c.Group.GetEncrypted(), want)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("conversation list holds %d of the two groups", seen)
	}
}
