package api

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/chat"
)

const (
	// holdMin: answers smaller than this are written without taking read
	// memory (most answers; the wait would cost more than it bounds).
	holdMin = 64 << 10
	// pageWriteTimeout bounds writing one large answer, so a client that
	// reads slowly cannot keep its share of the read memory for long.
	pageWriteTimeout = 30 * time.Second
)

// readCtx lets a page read for an HTTP request wait longer for read memory
// than one on a socket worker may: the request has its own goroutine.
func readCtx(r *http.Request) context.Context {
	return chat.WithReadWait(r.Context(), chat.HTTPReadWait)
}

// holdForWrite takes the node's read memory for encoding and writing m (its
// JSON is about 4/3 of its size, built in a growing buffer) when m is large,
// and sets a write deadline. When the memory does not come free in time it
// answers 429 and returns false. The caller runs release after writing.
func (a *API) holdForWrite(w http.ResponseWriter, r *http.Request, m proto.Message) (release func(), ok bool) {
	size := proto.Size(m)
	if size < holdMin {
		return func() {}, true
	}
	rel, err := a.cfg.Chat.ReserveRead(readCtx(r), 3*int64(size))
	if err != nil {
		writeChatError(w, err)
		return nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout))
	return func() {
		_ = rc.SetWriteDeadline(time.Time{})
		rel()
	}, true
}

// writePage writes a page (messages, conversations) as JSON within
// holdForWrite.
func (a *API) writePage(w http.ResponseWriter, r *http.Request, m proto.Message) {
	release, ok := a.holdForWrite(w, r, m)
	if !ok {
		return
	}
	defer release()
	writeProto(w, m)
}
