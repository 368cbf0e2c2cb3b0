package pgstore

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/parleyim/parley/internal/store"
)

// ErrUnavailable is wrapped by every error caused by the database being
// unreachable or refusing work for now; the same call may succeed later
// (for an Append: resend with the same client message ids).
var ErrUnavailable = errors.New("pgstore: database unavailable")

// unavailableError wraps ErrUnavailable and the cause. Temporary follows the
// net.Error convention, for callers that test for it rather than for ErrUnavailable.
type unavailableError struct {
	op  string
	err error
}

func (e *unavailableError) Error() string {
	return "pgstore: " + e.op + ": database unavailable: " + e.err.Error()
}
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
func (e *unavailableError) Temporary() bool { return true }

// permanentError marks an error of ours (a message that cannot be
// encoded, a schema this build cannot use) that no retry fixes, so mapErr
// does not take it for a connection failure.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// mapErr classifies an error of a database call. The store's own errors
// pass through; a server error is temporary or not by its SQLSTATE; any
// other error came from the connection (refused, reset, timed out, the
// call's deadline) and is temporary.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []error{store.ErrCorrupt, store.ErrNotFound, store.ErrExists, store.ErrClosed, store.ErrConflict, store.ErrStaleEpoch, store.ErrTooMany} {
		if errors.Is(err, e) {
			return err
		}
	}
	if errors.As(err, new(permanentError)) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if temporaryCode(pe.Code) {
			return &unavailableError{op: op, err: err}
		}
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return &unavailableError{op: op, err: err}
}

// temporaryCode reports SQLSTATEs that mean "not now" rather than "never".
func temporaryCode(code string) bool {
	switch code {
	case "57014", // query_canceled: statement_timeout
		"57P01", "57P02", "57P03", // admin or crash shutdown, cannot connect now
		"25006",          // read_only_sql_transaction: a failover in progress
		"55P03",          // lock_not_available
		"40001", "40P01": // serialization failure, deadlock (after our retries)
		return true
	}
	switch code[:2] {
	case "08", // connection exception
		"53", // insufficient resources (too many connections, disk full)
		"58": // system error (I/O)
		return true
	}
	return false
}

// retryable reports errors after which the whole transaction is run again:
// it was rolled back, and running it again sees what the other won.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01":
		return true
	case "23505":
		// Another node stored the same (sender, client id) after our
		// lookup: the retry's lookup finds it and answers Duplicate.
		return pe.ConstraintName == "messages_dedup"
	}
	return false
}
