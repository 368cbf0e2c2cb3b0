package e2ee

import (
	"bytes"
	"context"
	"errors"

	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Bounds (docs/e2ee.md).
const (
	// MaxKeyPackageBytes bounds one KeyPackage (a post-quantum suite's
	// keys fit; a classic one is a few hundred bytes).
	MaxKeyPackageBytes = 16 << 10
	// MaxKeyPackagesPerDevice bounds the one-time packages a device holds.
	MaxKeyPackagesPerDevice = 200
	// MaxKeyPackageDevices bounds the devices of a user holding packages
	// (so one user cannot fill the store under made-up device ids).
	MaxKeyPackageDevices = 20
	// MaxPublish bounds the one-time packages of one PublishKeyPackages
	// (its bytes are bounded by the frame size too).
	MaxPublish = 100
	// MaxClaimUsers bounds the users of one ClaimKeyPackages.
	MaxClaimUsers = 100
	// MaxClaimBytes bounds the packages one claim answers with, so the
	// answer fits a frame; users past it get none (claim them again).
	MaxClaimBytes = 48 << 10
	// EpochWindow: an application message made up to this many epochs
	// before the group's current one is still accepted (it was sent while
	// a Commit was on its way); older ones are refused as stale.
	EpochWindow = 2
	// MaxWelcomeBytes bounds a Welcome stored with a Commit.
	MaxWelcomeBytes = 48 << 10
)

// Service is the Delivery Service's state: key packages and epochs.
type Service struct {
	st store.E2EE
}

// New returns the service over st.
func New(st store.E2EE) *Service { return &Service{st: st} }

func storeErr(err error) error {
	if errors.Is(err, store.ErrTooMany) {
		return reqerr.Quota
	}
	return reqerr.Store(err)
}

// Publish stores key packages of (uid, device) and returns its count.
func (s *Service) Publish(ctx context.Context, uid, device string, r *pb.PublishKeyPackages) (*pb.KeyPackageCount, error) {
	if device == "" {
		return nil, reqerr.BadRequest // a session without a device (HTTP) has no packages
	}
	if len(r.KeyPackages) > MaxPublish {
		return nil, reqerr.TooLarge
	}
	if len(r.KeyPackages) == 0 && len(r.LastResort) == 0 && !r.Replace {
		return nil, reqerr.BadRequest
	}
	check := func(kp []byte) error {
		if len(kp) > MaxKeyPackageBytes {
			return reqerr.TooLarge
		}
		if CheckKeyPackage(kp) != nil {
			return reqerr.MLSInvalid
		}
		return nil
	}
	for _, kp := range r.KeyPackages {
		if err := check(kp); err != nil {
			return nil, err
		}
	}
	var lr []byte // nil: the last resort is kept as it is
	if len(r.LastResort) > 0 {
		if err := check(r.LastResort); err != nil {
			return nil, err
		}
		lr = r.LastResort
	}
	if r.Replace {
		// Not atomic with the write below: a claim in between finds the
		// device without packages, as if it had none yet.
		if err := s.st.DeleteKeyPackages(ctx, uid, device); err != nil {
			return nil, storeErr(err)
		}
	}
	n, err := s.st.PutKeyPackages(ctx, uid, device, r.KeyPackages, lr,
		store.KeyPackageLimits{PerDevice: MaxKeyPackagesPerDevice, Devices: MaxKeyPackageDevices})
	if err != nil {
		return nil, storeErr(err)
	}
	_, has, err := s.st.KeyPackageCount(ctx, uid, device)
	if err != nil {
		return nil, storeErr(err)
	}
	return &pb.KeyPackageCount{Count: uint32(n), LastResort: has}, nil
}

// Count returns (uid, device)'s count.
func (s *Service) Count(ctx context.Context, uid, device string) (*pb.KeyPackageCount, error) {
	if device == "" {
		return nil, reqerr.BadRequest
	}
	n, has, err := s.st.KeyPackageCount(ctx, uid, device)
	if err != nil {
		return nil, storeErr(err)
	}
	return &pb.KeyPackageCount{Count: uint32(n), LastResort: has}, nil
}

// Claim takes one package of each device of each user in ids (already
// checked: the claimer may message them), within MaxClaimBytes.
func (s *Service) Claim(ctx context.Context, ids []string) (*pb.ClaimedKeyPackages, error) {
	out := &pb.ClaimedKeyPackages{}
	size := 0
	for _, id := range ids {
		if size >= MaxClaimBytes {
			break // the rest are not claimed (nothing of theirs is taken)
		}
		kps, err := s.st.ClaimKeyPackages(ctx, id)
		if err != nil {
			if len(out.KeyPackages) > 0 {
				return out, nil // those taken are handed out, not lost
			}
			return nil, storeErr(err)
		}
		for _, k := range kps {
			out.KeyPackages = append(out.KeyPackages, &pb.ClaimedKeyPackage{UserId: k.UserID, DeviceId: k.DeviceID,
				KeyPackage: k.Data, LastResort: k.LastResort})
			size += len(k.Data) + len(k.DeviceID) + len(k.UserID) + 16
		}
	}
	return out, nil
}

// Epoch returns conv's MLS state: ok false when it is not encrypted.
func (s *Service) Epoch(ctx context.Context, conv string) (epoch uint64, ok bool, err error) {
	epoch, ok, err = s.st.MLSEpoch(ctx, conv)
	if err != nil {
		return 0, false, storeErr(err)
	}
	return epoch, ok, nil
}

// CheckMessage checks a send to the encrypted conversation conv: payload
// must be a PrivateMessage or PublicMessage of conv's group carrying an
// application message (of the current epoch, or up to EpochWindow before
// it) or a proposal (of the current epoch). Commits go through Commit.
func (s *Service) CheckMessage(ctx context.Context, conv string, payload []byte) error {
	f, err := ParseMessage(payload)
	if err != nil || !bytes.Equal(f.GroupID, []byte(conv)) || f.ContentType == ContentCommit {
		return reqerr.MLSInvalid
	}
	if f.ContentType == ContentApplication && f.WireFormat != WirePrivateMessage {
		return reqerr.MLSInvalid // RFC 9420 section 6.2: application data is always encrypted
	}
	cur, ok, err := s.Epoch(ctx, conv)
	if err != nil {
		return err
	}
	if !ok {
		return reqerr.MLSInvalid
	}
	switch {
	case f.Epoch > cur:
		return reqerr.MLSInvalid // no Commit made that epoch
	case f.ContentType == ContentProposal && f.Epoch != cur,
		f.Epoch+EpochWindow < cur:
		return reqerr.MLSStaleEpoch
	}
	return nil
}

// Commit checks a Commit (and the Welcome sent with it, if any) for conv
// and returns the step that stores it: from the Commit's epoch to the
// next. Whether that is still the group's epoch is decided by the store,
// atomically with the Commit's write.
func (s *Service) Commit(conv string, commit, welcome []byte) (*store.MLSStep, error) {
	if len(welcome) > MaxWelcomeBytes {
		return nil, reqerr.TooLarge
	}
	f, err := ParseMessage(commit)
	if err != nil || f.ContentType != ContentCommit || !bytes.Equal(f.GroupID, []byte(conv)) {
		return nil, reqerr.MLSInvalid
	}
	if len(welcome) > 0 && CheckWelcome(welcome) != nil {
		return nil, reqerr.MLSInvalid
	}
	return &store.MLSStep{Epoch: f.Epoch}, nil
}

// StepErr maps the store's refusal of an MLS step to the client's answer;
// nil for any other error.
func StepErr(err error) error {
	switch {
	case errors.Is(err, store.ErrStaleEpoch):
		return reqerr.MLSStaleEpoch
	case errors.Is(err, store.ErrNotFound):
		return reqerr.MLSInvalid // not an encrypted conversation
	}
	return nil
}
