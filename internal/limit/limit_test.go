package limit

import (
	"fmt"
	"testing"
	"time"
)

func TestBurstThenRefill(t *testing.T) {
	k := NewKeyed(Rate{PerSecond: 10, Burst: 3})
	now := int64(1e9)
	k.now = func() int64 { return now }
	for i := 0; i < 3; i++ {
		if !k.Allow("a") {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	if k.Allow("a") {
		t.Fatal("request past the burst allowed")
	}
	if !k.Allow("b") {
		t.Fatal("another key was limited by a's bucket")
	}
	now += 1e8 // 0.1 s at 10/s: one token
	if !k.Allow("a") {
		t.Fatal("no token after a refill interval")
	}
	if k.Allow("a") {
		t.Fatal("more than one token after one interval")
	}
	now += 10e9 // long idle: refilled to the burst, not beyond
	for i := 0; i < 3; i++ {
		if !k.Allow("a") {
			t.Fatalf("request %d after idle refused", i)
		}
	}
	if k.Allow("a") {
		t.Fatal("idle time refilled past the burst")
	}
}

func TestUnlimitedIsNil(t *testing.T) {
	k := NewKeyed(Rate{})
	if k != nil {
		t.Fatal("zero rate built a limiter")
	}
	for i := 0; i < 1000; i++ {
		if !k.Allow("x") {
			t.Fatal("nil limiter refused")
		}
	}
}

func TestIdleKeysAreForgotten(t *testing.T) {
	k := NewKeyed(Rate{PerSecond: 100, Burst: 1})
	now := int64(1e9)
	k.now = func() int64 { return now }
	for i := 0; i < shards*maxKeysPerShard*2; i++ {
		k.Allow(fmt.Sprint("ip-", i))
		now += 1e6
	}
	if n := k.Len(); n > shards*maxKeysPerShard {
		t.Fatalf("%d keys kept; idle keys must be swept (bound %d)", n, shards*maxKeysPerShard)
	}
}

// Take spends a burst at once, then asks for the wait that keeps a key to
// its rate; other keys are not affected, and nil never waits.
func TestTakeBytes(t *testing.T) {
	k := NewKeyed(Rate{PerSecond: 1000, Burst: 4000})
	now := int64(1e12)
	k.now = func() int64 { return now }
	if d := k.Take("u", 4000); d != 0 {
		t.Fatalf("the burst waited %v", d)
	}
	if d := k.Take("u", 500); d != 500*time.Millisecond {
		t.Fatalf("500 bytes past the burst: wait %v, want 500ms", d)
	}
	if d := k.Take("v", 1000); d != 0 {
		t.Fatalf("another key waited %v", d)
	}
	now += int64(time.Second) // 1000 tokens back: the debt of 500 is paid, 500 left
	if d := k.Take("u", 500); d != 0 {
		t.Fatalf("after a second: wait %v, want 0", d)
	}
	if d := k.Take("u", 1000); d != time.Second {
		t.Fatalf("wait %v, want 1s", d)
	}
	var none *Keyed
	if d := none.Take("u", 1e9); d != 0 {
		t.Fatalf("nil limiter waited %v", d)
	}
}

// A rate changed with SetRate applies to keys already tracked: a limiter
// that allowed everything starts refusing, a lower burst caps a full
// bucket, and unlimited allows again.
func TestSetRate(t *testing.T) {
	k := NewVar(Rate{})
	now := int64(0)
	k.now = func() int64 { return now }
	for range 100 {
		if !k.Allow("a") {
			t.Fatal("unlimited limiter refused")
		}
	}
	k.SetRate(Rate{PerSecond: 1, Burst: 2})
	if !k.Allow("a") || !k.Allow("a") || k.Allow("a") {
		t.Fatal("a burst of 2 did not allow exactly 2")
	}
	now += 10e9 // refills past the burst: capped at 2
	if !k.Allow("a") || !k.Allow("a") || k.Allow("a") {
		t.Fatal("refill was not capped at the burst")
	}
	k.SetRate(Rate{})
	if !k.Allow("a") || k.Take("a", 100) != 0 {
		t.Fatal("unlimited again still refuses")
	}
}
