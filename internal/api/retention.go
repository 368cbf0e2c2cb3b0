package api

import (
	"net/http"

	"github.com/parleyim/parley/internal/retention"
)

// retentionRoutes are the admin API's retention policies (docs/retention.md).
// The PUT, DELETE and POST are audited like every changing admin route.
func (a *API) retentionRoutes() []route {
	if a.cfg.Retention == nil {
		return nil
	}
	return []route{
		{"GET /v1/admin/conversations/{id}/retention", a.admin(a.adminGetRetention)},
		{"PUT /v1/admin/conversations/{id}/retention", a.admin(a.adminPutRetention)},
		{"DELETE /v1/admin/conversations/{id}/retention", a.admin(a.adminDeleteRetention)},
		{"POST /v1/admin/retention/sweep", a.admin(a.adminSweep)},
	}
}

// maxConvID bounds a conversation id in a path.
const maxConvID = 512

func (a *API) retentionConv(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if id == "" || len(id) > maxConvID {
		writeCode(w, codeBadRequest, "bad conversation id")
		return "", false
	}
	return id, true
}

// retentionView is a conversation's retention as the admin API shows it.
func (a *API) retentionView(w http.ResponseWriter, r *http.Request, conv string) {
	rs := a.cfg.Retention
	ctx := r.Context()
	p, own, err := rs.Policy(ctx, conv)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	floor, err := rs.Floor(ctx, conv)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	timer, err := rs.Disappearing(ctx, conv)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	out := map[string]any{"conversation_id": conv, "default": rs.Default(), "first_seq": floor,
		"disappearing_seconds": timer, "policy": nil}
	if own {
		out["policy"] = p
	}
	writeJSON(w, http.StatusOK, out)
}

// adminGetRetention: GET /v1/admin/conversations/{id}/retention.
func (a *API) adminGetRetention(w http.ResponseWriter, r *http.Request) {
	if conv, ok := a.retentionConv(w, r); ok {
		a.retentionView(w, r, conv)
	}
}

// adminPutRetention: PUT /v1/admin/conversations/{id}/retention with
// {"days": N, "messages": N} (0 or absent: no limit of that kind).
func (a *API) adminPutRetention(w http.ResponseWriter, r *http.Request) {
	conv, ok := a.retentionConv(w, r)
	if !ok {
		return
	}
	var p retention.Policy
	if !decodeBody(w, r, &p) {
		return
	}
	if !p.Valid() {
		writeCode(w, codeBadRequest, "days must be 0..36500 and messages 0 or more")
		return
	}
	noteAudit(r, "days", p.Days)
	noteAudit(r, "messages", p.Messages)
	if err := a.cfg.Retention.SetPolicy(r.Context(), conv, &p); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	a.retentionView(w, r, conv)
}

// adminDeleteRetention: DELETE /v1/admin/conversations/{id}/retention: the
// server default applies again.
func (a *API) adminDeleteRetention(w http.ResponseWriter, r *http.Request) {
	conv, ok := a.retentionConv(w, r)
	if !ok {
		return
	}
	if err := a.cfg.Retention.SetPolicy(r.Context(), conv, nil); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	a.retentionView(w, r, conv)
}

// adminSweep: POST /v1/admin/retention/sweep runs a sweep now (it also runs
// every retention_sweep_interval) and says what it deleted.
func (a *API) adminSweep(w http.ResponseWriter, r *http.Request) {
	st, err := a.cfg.Retention.Sweep(r.Context())
	if err != nil {
		a.log.Warn("retention sweep failed", "err", err)
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"disappeared": st.Disappeared, "expired": st.Expired, "conversations": st.Conversations, "files": st.Files})
}
