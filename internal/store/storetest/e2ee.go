package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// testKeyPackages: one-time packages are handed out oldest first, one per
// device and claim, then the device's last-resort package (kept); counts
// follow; the per-device bound refuses a publish whole; deletes remove a
// device's packages or all of a user's.
func testKeyPackages(t *testing.T, s store.Store) {
	ctx := context.Background()
	kp := func(dev string, i int) []byte { return []byte(fmt.Sprintf("kp-%s-%d\x00\xff", dev, i)) }
	if n, err := s.PutKeyPackages(ctx, "alice", "phone", [][]byte{kp("phone", 1), kp("phone", 2)}, []byte("lr-phone"), store.KeyPackageLimits{PerDevice: 3, Devices: 20}); err != nil || n != 2 {
		t.Fatalf("PutKeyPackages = %d, %v", n, err)
	}
	if n, err := s.PutKeyPackages(ctx, "alice", "laptop", [][]byte{kp("laptop", 1)}, nil, store.KeyPackageLimits{PerDevice: 3, Devices: 20}); err != nil || n != 1 {
		t.Fatalf("PutKeyPackages(laptop) = %d, %v", n, err)
	}
	if n, err := s.PutKeyPackages(ctx, "alice", "phone", [][]byte{kp("phone", 3), kp("phone", 4)}, nil, store.KeyPackageLimits{PerDevice: 3, Devices: 20}); !errors.Is(err, store.ErrTooMany) {
		t.Fatalf("PutKeyPackages past the bound = %d, %v; want ErrTooMany", n, err)
	}
	if n, lr, err := s.KeyPackageCount(ctx, "alice", "phone"); err != nil || n != 2 || !lr {
		t.Fatalf("KeyPackageCount(phone) = %d, %v, %v", n, lr, err)
	}
	if n, lr, err := s.KeyPackageCount(ctx, "alice", "laptop"); err != nil || n != 1 || lr {
		t.Fatalf("KeyPackageCount(laptop) = %d, %v, %v", n, lr, err)
	}
	claim := func() []store.KeyPackage {
		t.Helper()
		got, err := s.ClaimKeyPackages(ctx, "alice")
		if err != nil {
			t.Fatalf("ClaimKeyPackages: %v", err)
		}
		return got
	}
	str := func(ks []store.KeyPackage) string {
		out := ""
		for _, k := range ks {
			out += fmt.Sprintf("%s/%s:%q:%v ", k.UserID, k.DeviceID, k.Data, k.LastResort)
		}
		return out
	}
	want := func(got []store.KeyPackage, w ...store.KeyPackage) {
		t.Helper()
		if str(got) != str(w) {
			t.Fatalf("claimed %s\nwant    %s", str(got), str(w))
		}
	}
	want(claim(), store.KeyPackage{UserID: "alice", DeviceID: "laptop", Data: kp("laptop", 1)},
		store.KeyPackage{UserID: "alice", DeviceID: "phone", Data: kp("phone", 1)})
	want(claim(), store.KeyPackage{UserID: "alice", DeviceID: "phone", Data: kp("phone", 2)})
	lr := store.KeyPackage{UserID: "alice", DeviceID: "phone", Data: []byte("lr-phone"), LastResort: true}
	want(claim(), lr)
	want(claim(), lr)
	if n, has, err := s.KeyPackageCount(ctx, "alice", "phone"); err != nil || n != 0 || !has {
		t.Fatalf("KeyPackageCount after claims = %d, %v, %v", n, has, err)
	}
	// A new last resort replaces the old one.
	if _, err := s.PutKeyPackages(ctx, "alice", "phone", nil, []byte("lr-2"), store.KeyPackageLimits{PerDevice: 3, Devices: 20}); err != nil {
		t.Fatal(err)
	}
	want(claim(), store.KeyPackage{UserID: "alice", DeviceID: "phone", Data: []byte("lr-2"), LastResort: true})
	if got, err := s.ClaimKeyPackages(ctx, "nobody"); err != nil || len(got) != 0 {
		t.Fatalf("ClaimKeyPackages(nobody) = %s, %v", str(got), err)
	}
	// A user's devices are bounded too (alice's phone holds its last
	// resort; the laptop holds nothing now): a second device is refused,
	// a device already holding packages is not.
	lim1 := store.KeyPackageLimits{PerDevice: 3, Devices: 1}
	if _, err := s.PutKeyPackages(ctx, "alice", "tablet", [][]byte{kp("tablet", 1)}, nil, lim1); !errors.Is(err, store.ErrTooMany) {
		t.Fatalf("a second device: %v, want ErrTooMany", err)
	}
	if _, err := s.PutKeyPackages(ctx, "alice", "phone", nil, []byte("lr-2"), lim1); err != nil {
		t.Fatalf("a known device at the device bound: %v", err)
	}
	// Similar ids do not mix.
	if _, err := s.PutKeyPackages(ctx, "alice2", "phone", [][]byte{kp("x", 1)}, nil, store.KeyPackageLimits{PerDevice: 3, Devices: 20}); err != nil {
		t.Fatal(err)
	}
	want(claim(), store.KeyPackage{UserID: "alice", DeviceID: "phone", Data: []byte("lr-2"), LastResort: true})
	if _, err := s.PutKeyPackages(ctx, "alice", "laptop", [][]byte{kp("laptop", 2)}, []byte("lr-l"), store.KeyPackageLimits{PerDevice: 3, Devices: 20}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteKeyPackages(ctx, "alice", "phone"); err != nil {
		t.Fatal(err)
	}
	want(claim(), store.KeyPackage{UserID: "alice", DeviceID: "laptop", Data: kp("laptop", 2)})
	if err := s.DeleteKeyPackages(ctx, "alice", ""); err != nil {
		t.Fatal(err)
	}
	want(claim())
	if n, _, err := s.KeyPackageCount(ctx, "alice2", "phone"); err != nil || n != 1 {
		t.Fatalf("alice2's packages after alice's delete: %d, %v", n, err)
	}
}

// testConcurrentKeyPackageClaims: claims racing on one user's devices
// hand out every one-time package exactly once.
func testConcurrentKeyPackageClaims(t *testing.T, s store.Store) {
	ctx := context.Background()
	const perDevice, claimers = 40, 8
	devices := []string{"d1", "d2"}
	for _, d := range devices {
		var pkgs [][]byte
		for i := range perDevice {
			pkgs = append(pkgs, []byte(fmt.Sprintf("%s-%d", d, i)))
		}
		if _, err := s.PutKeyPackages(ctx, "bob", d, pkgs, []byte("lr-"+d), store.KeyPackageLimits{PerDevice: 200, Devices: 20}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perDevice {
				got, err := s.ClaimKeyPackages(ctx, "bob")
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, k := range got {
					if !k.LastResort {
						seen[string(k.Data)]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("package %s handed out %d times", k, n)
		}
	}
	if len(seen) != perDevice*len(devices) {
		t.Errorf("%d one-time packages handed out, want %d", len(seen), perDevice*len(devices))
	}
}

func mlsEvent(conv, from, id string) *pb.Message {
	m := msg(conv, from, "", id)
	m.ContentType = "message/mls"
	return m
}

// testMLSEpochs: a group made encrypted starts at epoch 0 and moves one
// epoch per accepted step, atomically with its event; a stale step, a
// step of a conversation that is not encrypted and a second create write
// nothing.
func testMLSEpochs(t *testing.T, s store.Store) {
	ctx := context.Background()
	conv := "g:mls"
	if _, ok, err := s.MLSEpoch(ctx, conv); err != nil || ok {
		t.Fatalf("MLSEpoch before create = %v, %v", ok, err)
	}
	if _, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "alice", "c0"), MLS: &store.MLSStep{Epoch: 0}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("step of a conversation not encrypted: %v, want ErrNotFound", err)
	}
	if _, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "alice", "create"), MLS: &store.MLSStep{Create: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "alice", "create2"), MLS: &store.MLSStep{Create: true}}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if e, ok, err := s.MLSEpoch(ctx, conv); err != nil || !ok || e != 0 {
		t.Fatalf("MLSEpoch = %d, %v, %v", e, ok, err)
	}
	r, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "alice", "c1"), MLS: &store.MLSStep{Epoch: 0}})
	if err != nil || r.Msg.Seq != 2 {
		t.Fatalf("step 0: %+v, %v", r, err)
	}
	if _, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "bob", "c1b"), MLS: &store.MLSStep{Epoch: 0}}); !errors.Is(err, store.ErrStaleEpoch) {
		t.Fatalf("stale step: %v, want ErrStaleEpoch", err)
	}
	if _, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "bob", "c5"), MLS: &store.MLSStep{Epoch: 5}}); !errors.Is(err, store.ErrStaleEpoch) {
		t.Fatalf("future step: %v, want ErrStaleEpoch", err)
	}
	// A retry of the accepted step is its duplicate, not a refusal.
	if r, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "alice", "c1"), MLS: &store.MLSStep{Epoch: 0}}); err != nil || !r.Duplicate {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	if e, _, _ := s.MLSEpoch(ctx, conv); e != 1 {
		t.Fatalf("epoch = %d, want 1", e)
	}
	if last := lastSeq(t, s, conv); last != 2 {
		t.Fatalf("LastSeq = %d, want 2: refused steps wrote events", last)
	}
}

// testConcurrentMLSCommits: of many steps from one epoch racing, exactly
// one is stored.
func testConcurrentMLSCommits(t *testing.T, s store.Store) {
	ctx := context.Background()
	conv := "g:race"
	if _, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, "alice", "create"), MLS: &store.MLSStep{Create: true}}); err != nil {
		t.Fatal(err)
	}
	for epoch := uint64(0); epoch < 3; epoch++ {
		const n = 8
		var wg sync.WaitGroup
		results := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Apply(ctx, store.Change{Event: mlsEvent(conv, fmt.Sprintf("u%d", i), fmt.Sprintf("e%d", epoch)), MLS: &store.MLSStep{Epoch: epoch}})
				results <- err
			}()
		}
		wg.Wait()
		close(results)
		won := 0
		for err := range results {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrStaleEpoch):
				t.Fatalf("epoch %d: %v", epoch, err)
			}
		}
		if won != 1 {
			t.Fatalf("epoch %d: %d steps won, want 1", epoch, won)
		}
	}
	if e, _, _ := s.MLSEpoch(ctx, conv); e != 3 {
		t.Fatalf("epoch = %d, want 3", e)
	}
	if last := lastSeq(t, s, conv); last != 4 {
		t.Fatalf("LastSeq = %d, want 4", last)
	}
}
