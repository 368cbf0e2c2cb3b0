package api

import (
	"net/http"

	"github.com/parleyim/parley/internal/auth"
)

// conversations: GET /v1/conversations?limit=N&page_token=T
func (a *API) conversations(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	limit, ok := queryUint(r, "limit")
	if !ok || limit > 1<<31 {
		writeCode(w, codeBadRequest, "limit must be a number")
		return
	}
	list, err := a.cfg.Chat.ConversationList(readCtx(r), c.UserID, uint32(limit), r.URL.Query().Get("page_token"))
	if err != nil {
		writeChatError(w, err)
		return
	}
	a.writePage(w, r, list)
}

// messages: GET /v1/conversations/{id}/messages?after=N&limit=L (forward sync)
// or ?before=N&limit=L (history; before 0 or absent with no after: newest).
func (a *API) messages(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	conv := r.PathValue("id")
	after, ok1 := queryUint(r, "after")
	before, ok2 := queryUint(r, "before")
	limit, ok3 := queryUint(r, "limit")
	if !ok1 || !ok2 || !ok3 || limit > 1<<31 || (after != 0 && before != 0) {
		writeCode(w, codeBadRequest, "after, before and limit must be numbers; give after or before, not both")
		return
	}
	var err error
	if r.URL.Query().Has("after") {
		page, e := a.cfg.Chat.SyncMessages(readCtx(r), c.UserID, conv, after, uint32(limit))
		if e == nil {
			a.writePage(w, r, page)
			return
		}
		err = e
	} else {
		page, e := a.cfg.Chat.History(readCtx(r), c.UserID, conv, before, uint32(limit))
		if e == nil {
			a.writePage(w, r, page)
			return
		}
		err = e
	}
	writeChatError(w, err)
}
