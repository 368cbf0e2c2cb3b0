package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
)

// uploadScenario measures uploads: -t users each upload files of
// --file-size bytes, one at a time, -c files in all, in one request each
// (POST /v1/files) or resumable (--resumable: tus, one PATCH per file);
// each is timed until the server answers with the file's record. Every
// upload the server took must be counted in its user's media usage, bytes
// and all.
type uploadScenario struct {
	hc     client.HTTPClient
	admin  *client.Admin
	users  []string
	tokens []string
	data   []byte
	taken  []atomic.Int64 // per user: uploads answered OK
}

func mediaHTTP(e *Env, conns int) client.HTTPClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxIdleConns = conns, conns
	return client.HTTPClient{BaseURL: e.Cfg.HTTPBase, Client: &http.Client{Transport: tr, Timeout: 10 * time.Minute}}
}

// benchFile is size random bytes: incompressible, and no type a server
// inspects (application/octet-stream).
func benchFile(size int64) []byte {
	b := make([]byte, size)
	_, _ = rand.Read(b)
	b[0] = 0 // not a known magic number
	return b
}

func (s *uploadScenario) Setup(ctx context.Context, e *Env) error {
	n := e.Cfg.Concurrency
	s.hc = mediaHTTP(e, n)
	s.admin = &client.Admin{HTTP: s.hc, Key: e.Cfg.APIKey}
	s.users = make([]string, n)
	for i := range n {
		s.users[i] = e.UserID("u", i)
	}
	var err error
	if s.tokens, err = e.MintTokens(ctx, s.users); err != nil {
		return err
	}
	s.data = benchFile(e.Cfg.FileSize)
	s.taken = make([]atomic.Int64, n)
	return nil
}

func (s *uploadScenario) Run(ctx context.Context, e *Env) error {
	var wg sync.WaitGroup
	for i := range s.users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e.Take(ctx) {
				e.M.sent.Add(1)
				t0 := time.Now()
				err := s.upload(context.WithoutCancel(ctx), e, i)
				e.M.done(time.Since(t0), err)
				if err == nil {
					e.M.acked.Add(1)
					s.taken[i].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	e.MarkEnd()
	return nil
}

func (s *uploadScenario) upload(ctx context.Context, e *Env, i int) error {
	size := int64(len(s.data))
	if e.Cfg.Resumable {
		_, err := s.hc.UploadResumable(ctx, s.tokens[i], "bench.bin", bytes.NewReader(s.data), size,
			client.ResumableOptions{ChunkBytes: size, Attempts: 1})
		return err
	}
	a, err := s.hc.UploadFile(ctx, s.tokens[i], "bench.bin", bytes.NewReader(s.data), size)
	if err == nil && a.Size != size {
		err = fmt.Errorf("the server recorded %d bytes of %d", a.Size, size)
	}
	return err
}

func (s *uploadScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	m := &MediaReport{FileBytes: e.Cfg.FileSize}
	for i, uid := range s.users {
		u, err := s.admin.MediaUsage(ctx, uid)
		if err != nil {
			return fmt.Errorf("media usage of %s: %w", uid, err)
		}
		want := s.taken[i].Load()
		m.Files += uint64(want)
		if u.Files != want || u.Bytes != want*e.Cfg.FileSize {
			m.Mismatched++
		}
	}
	r.Media = m
	return nil
}

// downloadScenario measures downloads through signed URLs: -t users each
// upload one file of --file-size bytes and ask for its URL (as an app asks
// when it shows a file); then each GETs its URL, one at a time, -c in all,
// each timed until the last byte, which must all be the file's.
type downloadScenario struct {
	hc    client.HTTPClient
	urls  []string
	files [][]byte
}

func (s *downloadScenario) Setup(ctx context.Context, e *Env) error {
	n := e.Cfg.Concurrency
	s.hc = mediaHTTP(e, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = e.UserID("d", i)
	}
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	s.urls, s.files = make([]string, n), make([][]byte, n)
	return parallel(ctx, n, setupParallel, func(ctx context.Context, i int) error {
		data := benchFile(e.Cfg.FileSize)
		a, err := s.hc.UploadFile(ctx, toks[i], "bench.bin", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return fmt.Errorf("upload for %s: %w", ids[i], err)
		}
		c, err := e.Dial(ctx, e.ClientOptions(toks[i], "d0"))
		if err != nil {
			return err
		}
		defer e.Close(c)
		u, err := c.FileURL(ctx, a.Id, "", 0, false)
		if err != nil {
			return fmt.Errorf("file URL for %s: %w", ids[i], err)
		}
		s.urls[i], s.files[i] = u.Url, data
		return nil
	})
}

var errBadBytes = errors.New("the bytes downloaded are not the file's")

func (s *downloadScenario) Run(ctx context.Context, e *Env) error {
	var wg sync.WaitGroup
	for i := range s.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, len(s.files[i]))
			for e.Take(ctx) {
				e.M.sent.Add(1)
				t0 := time.Now()
				var err error
				buf, err = s.get(context.WithoutCancel(ctx), i, buf[:0])
				e.M.done(time.Since(t0), err)
				if err == nil {
					e.M.acked.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	e.MarkEnd()
	return nil
}

func (s *downloadScenario) get(ctx context.Context, i int, buf []byte) ([]byte, error) {
	resp, err := s.hc.Open(ctx, s.urls[i], "")
	if err != nil {
		return buf, err
	}
	defer resp.Body.Close()
	w := bytes.NewBuffer(buf)
	if _, err := io.Copy(w, resp.Body); err != nil {
		return w.Bytes(), err
	}
	if !bytes.Equal(w.Bytes(), s.files[i]) {
		return w.Bytes(), errBadBytes
	}
	return w.Bytes(), nil
}

func (s *downloadScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	r.Media = &MediaReport{FileBytes: e.Cfg.FileSize} // Files: the requests answered OK, once counted
	return nil
}

// MediaReport is upload's and download's result.
type MediaReport struct {
	// FileBytes is each file's size; Files the files moved (answered OK).
	FileBytes int64  `json:"file_bytes"`
	Files     uint64 `json:"files"`
	// MBPerSec is Files × FileBytes / the timed phase, in MB (10^6 bytes).
	MBPerSec float64 `json:"mb_per_sec"`
	// Mismatched (upload) are users whose media usage is not what their
	// accepted uploads add up to.
	Mismatched uint64 `json:"mismatched,omitempty"`
}

func (m *MediaReport) finalize(r *Report) {
	if r.Scenario == "download" {
		m.Files = r.OK
	}
	if r.TotalSeconds > 0 {
		m.MBPerSec = float64(m.Files) * float64(m.FileBytes) / 1e6 / r.TotalSeconds
	}
	if m.Mismatched > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d users' media usage differs from their accepted uploads", m.Mismatched))
	}
	if r.OK < r.Requests {
		r.Failures = append(r.Failures, fmt.Sprintf("%d of %d transfers failed", r.Requests-r.OK, r.Requests))
	}
}
