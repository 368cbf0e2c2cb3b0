package store

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// End-to-end encryption (internal/e2ee, docs/e2ee.md): the MLS KeyPackages
// devices publish and the epoch of each encrypted group. The server only
// keeps and hands out opaque bytes; it never holds a key.

// ErrStaleEpoch: Apply's MLS step names an epoch the group is not at (a
// Commit of that epoch was accepted first). Nothing is written.
var ErrStaleEpoch = errors.New("store: stale MLS epoch")

// MLSStep is the MLS state change an Apply makes atomically with its Event.
type MLSStep struct {
	// Create marks the Event's conversation as an encrypted group at epoch
	// 0 (with the group's creation); ErrExists when it already is one.
	Create bool
	// Otherwise the group's epoch moves from Epoch to Epoch+1 (a Commit
	// made in Epoch was accepted): ErrStaleEpoch when it is not at Epoch,
	// ErrNotFound when the conversation is not an encrypted group. Of
	// concurrent steps from one epoch (on any node) exactly one succeeds.
	Epoch uint64
}

// KeyPackage is one MLS KeyPackage handed out by ClaimKeyPackages.
type KeyPackage struct {
	UserID, DeviceID string
	Data             []byte
	// LastResort: the device had no one-time package left; this one stays.
	LastResort bool
}

// SortKeyPackages orders a claim's answer by device id, keeping the order
// of one device's packages (both stores answer in this order).
func SortKeyPackages(kps []KeyPackage) {
	slices.SortStableFunc(kps, func(a, b KeyPackage) int { return strings.Compare(a.DeviceID, b.DeviceID) })
}

// KeyPackageLimits bound what PutKeyPackages stores.
type KeyPackageLimits struct {
	PerDevice int // one-time packages a device holds
	Devices   int // devices of a user holding packages (one-time or last resort)
}

// E2EE keeps MLS KeyPackages and encrypted groups' epochs.
type E2EE interface {
	// PutKeyPackages adds one-time packages for (userID, deviceID) and,
	// when lastResort is not nil, replaces the device's last-resort
	// package, atomically. When the device would hold more than
	// lim.PerDevice one-time packages, or the user would have packages on
	// more than lim.Devices devices, nothing is written and ErrTooMany is
	// returned. It returns the device's one-time packages after the write.
	PutKeyPackages(ctx context.Context, userID, deviceID string, pkgs [][]byte, lastResort []byte, lim KeyPackageLimits) (int, error)
	// ClaimKeyPackages takes one package of each of userID's devices
	// (those holding a package), by device id: a one-time package,
	// removed in the same step so that it is never handed out twice (on
	// any node, under concurrent claims), else the last-resort package
	// (kept). None: an empty list.
	ClaimKeyPackages(ctx context.Context, userID string) ([]KeyPackage, error)
	// KeyPackageCount returns the device's one-time packages left and
	// whether it has a last-resort package.
	KeyPackageCount(ctx context.Context, userID, deviceID string) (count int, lastResort bool, err error)
	// DeleteKeyPackages removes every package of the device (deviceID ""
	// : of every device of the user).
	DeleteKeyPackages(ctx context.Context, userID, deviceID string) error
	// MLSEpoch returns an encrypted group's epoch; ok is false when the
	// conversation is not an encrypted group.
	MLSEpoch(ctx context.Context, conversationID string) (epoch uint64, ok bool, err error)
}

// MLSEpochRecord is an encrypted group's epoch as parley migrate copies it.
type MLSEpochRecord struct {
	ConversationID string
	Epoch          uint64
}
