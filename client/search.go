package client

import (
	"context"
	"net/http"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Search finds messages in the user's conversations, newest first: only
// what the user may read, each hit with a snippet and the byte ranges of
// the matched words in it. q.Query is the words (or, with q.Phrase, the
// phrase); the other fields filter. For the next page pass the result's
// Next as q.Before; Next is nil at the end. The server answers
// TOO_MANY_REQUESTS (temporary) when it runs as many searches as it allows.
func (c *Client) Search(ctx context.Context, q *pb.Search) (*pb.SearchResults, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Search{Search: q}})
	if err != nil {
		return nil, err
	}
	if res := r.GetSearchResults(); res != nil {
		return res, nil
	}
	return nil, ErrProtocol
}

// SearchText finds messages with every word of text, newest first; see
// [Client.Search] for filters and paging.
func (c *Client) SearchText(ctx context.Context, text string, limit uint32) (*pb.SearchResults, error) {
	return c.Search(ctx, &pb.Search{Query: text, Limit: limit})
}

// Search searches every conversation (or q.ConversationId) as the
// operator, for moderation: sender-only messages included, recalled ones
// gone. The server writes the query to its audit log.
func (a *Admin) Search(ctx context.Context, q *pb.Search) (*pb.SearchResults, error) {
	var out pb.SearchResults
	err := a.do(ctx, http.MethodPost, "/v1/admin/search", q, &out)
	return retT(&out, err)
}
