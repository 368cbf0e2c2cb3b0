package api

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/chat"
)

// The push API (goim's semantics): an opaque body with an operation code,
// pushed to users' devices, to sessions, to a room or to every session.
// Pushes are best effort and not stored: the answer counts the sessions on
// this node that took the push and those that refused it (send queue backed up). These handlers are on the hot path of the
// push benchmark: they read the query without building url.Values, allocate
// the body and one Outbound, and touch no storage.

// maxPushTargets bounds the user ids or device keys of one push.
const maxPushTargets = 1000

// maxDeviceKey bounds a device key (a session id).
const maxDeviceKey = 64

var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// pushUsers: POST /v1/admin/push/users?user_ids=a,b&op=N, body = the push body.
func (a *API) pushUsers(w http.ResponseWriter, r *http.Request) {
	a.pushTargets(w, r, "user_ids", "user ids", auth.ValidUserID, a.cfg.Chat.PushUsers)
}

// pushDevices: POST /v1/admin/push/devices?keys=S1,S2&op=N (keys are AuthOk.session_id).
func (a *API) pushDevices(w http.ResponseWriter, r *http.Request) {
	a.pushTargets(w, r, "keys", "session ids", validDeviceKey, a.cfg.Chat.PushSessions)
}

// pushTargets runs a push to the comma-separated targets in query parameter
// param (1-1000 of them, each valid, repeats counted once).
func (a *API) pushTargets(w http.ResponseWriter, r *http.Request, param, what string,
	valid func(string) bool, push func([]string, int32, []byte) chat.PushResult) {
	raw, ok := queryParam(r.URL.RawQuery, param)
	op, okOp := pushOp(r)
	if !ok || !okOp {
		writeCode(w, codeBadRequest, param+" (comma-separated "+what+") and op (int32) are required")
		return
	}
	var buf [16]string
	targets, ok := splitTargets(buf[:0], raw, valid)
	if !ok {
		writeCode(w, codeBadRequest, param+" must be 1-1000 valid "+what+", comma-separated")
		return
	}
	body, ok := readPushBody(w, r)
	if !ok {
		return
	}
	writePushed(w, push(targets, op, body))
}

// pushRoom: POST /v1/admin/push/room?room=R&op=N.
func (a *API) pushRoom(w http.ResponseWriter, r *http.Request) {
	room, ok := queryParam(r.URL.RawQuery, "room")
	op, okOp := pushOp(r)
	if !ok || !okOp || !chat.ValidRoom(room) {
		writeCode(w, codeBadRequest, "room (1-128 chars [A-Za-z0-9_.:-]) and op (int32) are required")
		return
	}
	body, ok := readPushBody(w, r)
	if !ok {
		return
	}
	writePushed(w, a.cfg.Chat.PushRoom(room, op, body))
}

// pushAll: POST /v1/admin/push/all?op=N, to every session on this node.
func (a *API) pushAll(w http.ResponseWriter, r *http.Request) {
	op, ok := pushOp(r)
	if !ok {
		writeCode(w, codeBadRequest, "op (int32) is required")
		return
	}
	body, ok := readPushBody(w, r)
	if !ok {
		return
	}
	writePushed(w, a.cfg.Chat.PushAll(op, body))
}

// roomInfo: GET /v1/admin/rooms/{room} → {"room": R, "online": N}.
func (a *API) roomInfo(w http.ResponseWriter, r *http.Request) {
	room := r.PathValue("room")
	if !chat.ValidRoom(room) {
		writeCode(w, codeBadRequest, "room must be 1-128 chars [A-Za-z0-9_.:-]")
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Room   string `json:"room"`
		Online int    `json:"online"`
	}{room, a.cfg.Chat.RoomOnlineAll(r.Context(), room)})
}

func validDeviceKey(k string) bool { return len(k) > 0 && len(k) <= maxDeviceKey }

// pushOp reads the required op parameter (an int32).
func pushOp(r *http.Request) (int32, bool) {
	v, ok := queryParam(r.URL.RawQuery, "op")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err == nil
}

// queryParam returns the first value of name in a raw query, unescaped;
// false when absent, empty or badly escaped. It allocates only for values
// that need unescaping.
func queryParam(raw, name string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return "", false
			}
			v = u
		}
		return v, v != ""
	}
	return "", false
}

// splitTargets appends the comma-separated items of list to dst; false if
// one is invalid or there are more than maxPushTargets.
func splitTargets(dst []string, list string, valid func(string) bool) ([]string, bool) {
	for n := 0; list != ""; n++ {
		var item string
		item, list, _ = strings.Cut(list, ",")
		if !valid(item) || n == maxPushTargets {
			return nil, false
		}
		// Delivery trusts long target lists not to repeat (it checks only
		// short ones), so a repeat is dropped here rather than pushed twice.
		if !slices.Contains(dst, item) {
			dst = append(dst, item)
		}
	}
	return dst, len(dst) > 0
}

// readPushBody reads the raw body (any content type, at most MaxBodyBytes).
func readPushBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, "request body too large")
		return nil, false
	}
	if r.ContentLength == 0 {
		return nil, true
	}
	if r.ContentLength > 0 {
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			writeCode(w, codeBadRequest, "unreadable body")
			return nil, false
		}
		return body, true
	}
	return readBody(w, r) // length unknown (chunked): read up to the cap
}

// writePushed answers 200 {"pushed": taken, "refused": refused, "forwarded": bool}:
// the sessions on this node that took the push, those that refused it
// because their send queue was backed up, and whether it also went to other
// nodes (whose sessions are not counted here).
func writePushed(w http.ResponseWriter, r chat.PushResult) {
	w.Header()["Content-Type"] = jsonContentType
	var b [80]byte
	out := append(b[:0], `{"pushed":`...)
	out = strconv.AppendInt(out, int64(r.Taken), 10)
	out = append(out, `,"refused":`...)
	out = strconv.AppendInt(out, int64(r.Refused), 10)
	out = append(out, `,"forwarded":`...)
	out = strconv.AppendBool(out, r.Forwarded)
	out = append(out, "}\n"...)
	_, _ = w.Write(out)
}
