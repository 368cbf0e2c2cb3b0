package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// testPNG is a w×h PNG with noise (so it does not compress to nothing).
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	noise := make([]byte, w*h)
	_, _ = rand.Read(noise)
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), noise[y*w+x], 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func (ts *testServer) http() client.HTTPClient { return client.HTTPClient{BaseURL: ts.httpBase} }

// fetch downloads a URL the server signed; rangeHeader asks for part of it.
func (ts *testServer) fetch(t *testing.T, u, rangeHeader string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := ts.http().Open(ctx10(t), u, rangeHeader)
	if err != nil {
		var he *client.HTTPError
		if errors.As(err, &he) {
			return he.Status, nil, nil
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestAttachmentLifecycle: a user uploads an image, sends it; the
// recipient sees the attachment as the server describes it (sniffed type,
// size, thumbnail, placeholder), in the live message and in history, and
// downloads it (whole, by range, its thumbnail) through signed URLs. No one
// else can have a URL for it, whatever they ask; a forged or altered URL is
// refused; once recalled, the file is unreadable.
func TestAttachmentLifecycle(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctx10(t)
	aliceTok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, aliceTok, "a1", "web", transports[0])
	bob, bobRec := ts.connect(t, "bob", "b1", "web", transports[2])
	carol, _ := ts.connect(t, "carol", "c1", "web", transports[1])

	pic := testPNG(t, 640, 480)
	// The client says it is a JPEG named with a path: neither is taken.
	att, err := ts.http().UploadFile(ctx, aliceTok, "../../etc/holiday\x00.png", bytes.NewReader(pic), int64(len(pic)))
	if err != nil {
		t.Fatal(err)
	}
	if att.Id == "" || att.ContentType != "image/png" || att.Size != int64(len(pic)) || att.Width != 640 ||
		att.Height != 480 || !att.Thumbnail || att.Blurhash == "" || att.Name != "holiday.png" {
		t.Fatalf("upload answered %v", att)
	}

	ack, err := alice.Send(ctx, &pb.Send{To: "bob", ContentType: "image", Attachments: []*pb.Attachment{{Id: att.Id, Name: "ignored", Size: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var got *pb.Message
	for deadline := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range bobRec.messages() {
			if m.ConversationId == ack.ConversationId && m.Seq == ack.Seq {
				got = m
			}
		}
	}
	if got == nil {
		t.Fatal("bob did not get the message")
	}
	if len(got.Attachments) != 1 || got.Attachments[0].Name != "holiday.png" || got.Attachments[0].Size != int64(len(pic)) ||
		got.Attachments[0].Width != 640 || !got.Attachments[0].Thumbnail {
		t.Fatalf("bob got attachments %v", got.Attachments)
	}
	page, err := bob.History(ctx, ack.ConversationId, 0, 10)
	if err != nil || len(page.Messages) != 1 || len(page.Messages[0].Attachments) != 1 || page.Messages[0].Attachments[0].Id != att.Id {
		t.Fatalf("history: %v, %v", page, err)
	}

	u, err := bob.FileURL(ctx, att.Id, ack.ConversationId, ack.Seq, false)
	if err != nil {
		t.Fatal(err)
	}
	if u.ExpiresAt <= time.Now().UnixMilli() {
		t.Fatalf("URL expires at %d, in the past", u.ExpiresAt)
	}
	status, hdr, body := ts.fetch(t, u.Url, "")
	if status != 200 || !bytes.Equal(body, pic) || hdr.Get("Content-Type") != "image/png" ||
		hdr.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(hdr.Get("Cache-Control"), "private") {
		t.Fatalf("download: %d %v, %d bytes", status, hdr, len(body))
	}
	status, _, body = ts.fetch(t, u.Url, "bytes=100-199")
	if status != http.StatusPartialContent || !bytes.Equal(body, pic[100:200]) {
		t.Fatalf("range download: %d, %d bytes", status, len(body))
	}
	tu, err := bob.FileURL(ctx, att.Id, ack.ConversationId, ack.Seq, true)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body = ts.fetch(t, tu.Url, "")
	if status != 200 {
		t.Fatalf("thumbnail: %d", status)
	}
	th, err := jpeg.Decode(bytes.NewReader(body))
	if err != nil || th.Bounds().Dx() != 320 || th.Bounds().Dy() != 240 {
		t.Fatalf("thumbnail is not a 320×240 JPEG: %v %v", err, th)
	}
	// The uploader may ask without naming a message.
	if _, err := alice.FileURL(ctx, att.Id, "", 0, false); err != nil {
		t.Fatalf("uploader's URL: %v", err)
	}

	// Nobody else gets a URL, and the answer never says whether the file,
	// the message or the conversation exists.
	denied := []struct {
		name string
		c    *client.Client
		r    *pb.FileUrl
	}{
		{"carol naming the message", carol, &pb.FileUrl{FileId: att.Id, ConversationId: ack.ConversationId, Seq: ack.Seq}},
		{"carol as if she uploaded it", carol, &pb.FileUrl{FileId: att.Id}},
		{"bob as if he uploaded it", bob, &pb.FileUrl{FileId: att.Id}},
		{"bob, another seq", bob, &pb.FileUrl{FileId: att.Id, ConversationId: ack.ConversationId, Seq: ack.Seq + 5}},
		{"bob, a file the message does not carry", bob, &pb.FileUrl{FileId: "0123456789abcdef0123456789abcdef", ConversationId: ack.ConversationId, Seq: ack.Seq}},
		{"carol, no such file", carol, &pb.FileUrl{FileId: "0123456789abcdef0123456789abcdef"}},
		{"carol, a conversation she is not in", carol, &pb.FileUrl{FileId: att.Id, ConversationId: "p:alice:zed", Seq: 1}},
	}
	for _, d := range denied {
		_, err := d.c.FileURL(ctx, d.r.FileId, d.r.ConversationId, d.r.Seq, d.r.Thumbnail)
		if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
			t.Errorf("%s: %v, want PERMISSION_DENIED", d.name, err)
		}
	}
	// Sending someone else's file, or one that does not exist: the same.
	for _, id := range []string{att.Id, "0123456789abcdef0123456789abcdef"} {
		_, err := carol.Send(ctx, &pb.Send{To: "bob", Attachments: []*pb.Attachment{{Id: id}}})
		if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
			t.Errorf("carol sending file %s: %v, want PERMISSION_DENIED", id, err)
		}
	}

	// Altered URLs are refused: another file's id, the thumbnail's
	// variant, a later expiry, a signature of the wrong length.
	for _, bad := range []string{
		strings.Replace(u.Url, att.Id, "0123456789abcdef0123456789abcdef", 1),
		strings.Replace(u.Url, "v=f", "v=t", 1),
		strings.Replace(u.Url, "&e=", "&e=9", 1),
		u.Url + "x",
	} {
		if status, _, _ := ts.fetch(t, bad, ""); status != http.StatusForbidden {
			t.Errorf("altered URL %s: %d, want 403", bad, status)
		}
	}

	// Recalled: no new URL (the one made before works until it expires).
	if _, err := alice.Recall(ctx, ack.ConversationId, ack.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.FileURL(ctx, att.Id, ack.ConversationId, ack.Seq, false); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("URL of a recalled message's file: %v, want PERMISSION_DENIED", err)
	}
	page, err = bob.History(ctx, ack.ConversationId, 0, 10)
	if err != nil || len(page.Messages[0].Attachments) != 0 {
		t.Fatalf("the recalled message still lists attachments: %v, %v", page, err)
	}
}

// TestAttachmentInGroupAfterRemoval: a member removed from a group can
// fetch the files sent while they were in it, not those sent after.
func TestAttachmentInGroupAfterRemoval(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctx10(t)
	aliceTok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, aliceTok, "a1", "web", transports[0])
	dave, _ := ts.connect(t, "dave", "d1", "web", transports[0])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"dave", "erin"}})
	if err != nil {
		t.Fatal(err)
	}
	send := func() (*pb.Attachment, *pb.SendAck) {
		t.Helper()
		data := []byte("quarterly numbers, plain text, " + fmt.Sprint(time.Now().UnixNano()))
		att, err := ts.http().UploadFile(ctx, aliceTok, "notes.txt", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(att.ContentType, "text/plain") || att.Thumbnail {
			t.Fatalf("a text upload: %v", att)
		}
		ack, err := alice.Send(ctx, &pb.Send{ConversationId: g.ConversationId, Attachments: []*pb.Attachment{att}})
		if err != nil {
			t.Fatal(err)
		}
		return att, ack
	}
	before, ackBefore := send()
	if err := alice.RemoveMember(ctx, g.ConversationId, "dave"); err != nil {
		t.Fatal(err)
	}
	after, ackAfter := send()
	if _, err := dave.FileURL(ctx, before.Id, g.ConversationId, ackBefore.Seq, false); err != nil {
		t.Errorf("a file sent while dave was a member: %v", err)
	}
	if _, err := dave.FileURL(ctx, after.Id, g.ConversationId, ackAfter.Seq, false); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a file sent after dave was removed: %v, want PERMISSION_DENIED", err)
	}
}

// TestUploadBadInput: each bad upload gets its error and leaves nothing
// behind (the user's usage stays 0).
func TestUploadBadInput(t *testing.T) {
	ts := startServer(t, func(c *server.Config) {
		c.MediaAllowedTypes = []string{"image/*", "text/plain"}
		c.MediaMaxFileBytes = 1 << 20
	})
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	upload := func(body []byte, size int64) error {
		_, err := ts.http().UploadFile(ctx, tok, "x", bytes.NewReader(body), size)
		return err
	}
	code := func(err error) string {
		var he *client.HTTPError
		if errors.As(err, &he) {
			return he.Code
		}
		return fmt.Sprint(err)
	}
	zip := append([]byte("PK\x03\x04"), make([]byte, 200)...)
	if err := upload(zip, int64(len(zip))); code(err) != "unsupported_media_type" {
		t.Errorf("a zip (not allowed): %v", err)
	}
	big := make([]byte, 1<<20+1)
	if err := upload(big, int64(len(big))); code(err) != "too_large" {
		t.Errorf("past media_max_file_bytes: %v", err)
	}
	if err := upload(nil, 0); code(err) != "bad_request" {
		t.Errorf("empty: %v", err)
	}
	// A decompression bomb: a PNG declaring 40000×40000 pixels in a few
	// hundred bytes is refused, not decoded.
	if err := upload(bombPNG(t, 40000, 40000), -1); err == nil {
		t.Error("a chunked body (no length) was taken")
	}
	bomb := bombPNG(t, 40000, 40000)
	if err := upload(bomb, int64(len(bomb))); code(err) != "too_large" {
		t.Errorf("a decompression bomb: %v", err)
	}
	// A truncated image (its bytes end mid-way).
	pic := testPNG(t, 64, 64)
	if err := upload(pic[:len(pic)/2], int64(len(pic)/2)); code(err) != "bad_request" {
		t.Errorf("a truncated PNG: %v", err)
	}
	// A body shorter than its Content-Length: the connection ends early.
	status, _ := rawUpload(t, ts, tok, 5000, []byte("hello, only a few bytes"))
	if status != 0 && status != http.StatusBadRequest {
		t.Errorf("a short body: %d", status)
	}
	usage, err := adminClient(ts).MediaUsage(ctx, "alice")
	if err != nil || usage.Files != 0 || usage.Bytes != 0 {
		t.Fatalf("after refused uploads: %+v, %v", usage, err)
	}
}

// rawUpload sends a POST /v1/files declaring size bytes and sending body,
// then closes its side; it returns the status, 0 when none came.
func rawUpload(t *testing.T, ts *testServer, tok string, size int, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.httpBase+"/v1/files?name=x", io.MultiReader(bytes.NewReader(body), errReader{}))
	req.ContentLength = int64(size)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the client gave up") }

// TestUploadQuota: uploads past media_quota_bytes are refused, also when
// they run at once; what was refused leaves nothing.
func TestUploadQuota(t *testing.T) {
	const quota = 100 << 10
	ts := startServer(t, func(c *server.Config) { c.MediaQuotaBytes = quota })
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	chunk := bytes.Repeat([]byte("a line of text\n"), 2500) // 37,500 bytes
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, refused int
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ts.http().UploadFile(ctx, tok, "t.txt", bytes.NewReader(chunk), int64(len(chunk)))
			mu.Lock()
			defer mu.Unlock()
			var he *client.HTTPError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &he) && he.Code == "quota_exceeded" && !he.Temporary():
				refused++
			default:
				t.Errorf("upload: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 2 || refused != 4 {
		t.Fatalf("%d uploads taken and %d refused, want 2 and 4 (quota %d, files of %d)", ok, refused, quota, len(chunk))
	}
	usage, err := adminClient(ts).MediaUsage(ctx, "alice")
	if err != nil || usage.Files != 2 || usage.Bytes != 2*int64(len(chunk)) || usage.QuotaBytes != quota {
		t.Fatalf("usage %+v, %v", usage, err)
	}
}

// TestUnattachedFilesAreCollected: a file never sent is deleted once
// media_unattached_ttl has passed (its URL then finds nothing); a sent one
// stays; a file too close to collection can no longer be attached.
func TestUnattachedFilesAreCollected(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	up := func() *pb.Attachment {
		t.Helper()
		data := []byte("some text " + fmt.Sprint(time.Now().UnixNano()))
		a, err := ts.http().UploadFile(ctx, tok, "t.txt", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	kept, lost := up(), up()
	if _, err := alice.Send(ctx, &pb.Send{To: "bob", Attachments: []*pb.Attachment{kept}}); err != nil {
		t.Fatal(err)
	}
	lostURL, err := alice.FileURL(ctx, lost.Id, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ts.CollectMediaForTest(time.Now()); err != nil || n != 0 {
		t.Fatalf("collected %d, %v before the TTL", n, err)
	}
	if n, err := ts.CollectMediaForTest(time.Now().Add(25 * time.Hour)); err != nil || n != 1 {
		t.Fatalf("collected %d, %v after the TTL; want 1", n, err)
	}
	if status, _, _ := ts.fetch(t, lostURL.Url, ""); status != http.StatusNotFound {
		t.Fatalf("a collected file's URL: %d, want 404", status)
	}
	if _, err := alice.FileURL(ctx, kept.Id, "", 0, false); err != nil {
		t.Fatalf("the sent file: %v", err)
	}
	usage, err := adminClient(ts).MediaUsage(ctx, "alice")
	if err != nil || usage.Files != 1 {
		t.Fatalf("usage after collection: %+v, %v", usage, err)
	}
}

// TestResumableUploadAcrossDroppedConnections: a resumable upload whose
// connections are cut every 256 KiB resumes where the server's copy ends
// and arrives whole; the file is then sent and downloaded byte for byte.
// Another user cannot see or continue the upload.
func TestResumableUploadAcrossDroppedConnections(t *testing.T) {
	if raceDetector {
		t.Skip("cuts resumable uploads short, which races inside tusd v2.9.1 (.ci/run); run without -race")
	}
	ts := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tok := ts.mint(t, "alice")
	data := make([]byte, 3<<20+12345)
	_, _ = rand.Read(data)
	cut := newCuttingProxy(t, ts.HTTPAddr(), 256<<10)
	hc := client.HTTPClient{BaseURL: "http://" + cut.addr}
	var loc string
	fileID, err := hc.UploadResumable(ctx, tok, "video.bin", bytes.NewReader(data), int64(len(data)),
		client.ResumableOptions{ChunkBytes: 1 << 20, Attempts: 8, OnCreated: func(l string) { loc = l }})
	if err != nil {
		t.Fatal(err)
	}
	if cut.cuts() < 3 {
		t.Fatalf("only %d connections were cut: the test did not test resuming", cut.cuts())
	}
	// Someone else cannot learn of the upload or write to it.
	mallory := ts.mint(t, "mallory")
	req, _ := http.NewRequest(http.MethodHead, strings.Replace(loc, cut.addr, ts.HTTPAddr(), 1), nil)
	req.Header.Set("Authorization", "Bearer "+mallory)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another user's HEAD of the upload: %v %v, want 404", resp, err)
	}
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	ack, err := alice.Send(ctx, &pb.Send{To: "bob", Attachments: []*pb.Attachment{{Id: fileID}}})
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := ts.connect(t, "bob", "b1", "web", transports[0])
	u, err := bob.FileURL(ctx, fileID, ack.ConversationId, ack.Seq, false)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := ts.fetch(t, u.Url, ""); status != 200 || !bytes.Equal(body, data) {
		t.Fatalf("download of the resumed upload: %d, %d bytes (want %d)", status, len(body), len(data))
	}
}

// bombPNG is a valid PNG header declaring w×h pixels, with a tiny
// compressed stream: the kind of file that makes a naive decoder allocate
// gigabytes.
func bombPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	img := image.NewGray(image.Rect(0, 0, 1, 1))
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	p := b.Bytes()
	// Rewrite IHDR's width and height (bytes 16..23) and fix its CRC.
	put32 := func(i int, v uint32) { p[i], p[i+1], p[i+2], p[i+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v) }
	put32(16, uint32(w))
	put32(20, uint32(h))
	put32(29, crc32.ChecksumIEEE(p[12:29]))
	return p
}

// cuttingProxy forwards TCP connections to a server and cuts each one
// after it has carried limit bytes from the client.
type cuttingProxy struct {
	addr string
	mu   sync.Mutex
	n    int
}

func (p *cuttingProxy) cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func newCuttingProxy(t *testing.T, target string, limit int64) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &cuttingProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				defer s.Close()
				go func() { _, _ = io.Copy(c, s) }()
				n, _ := io.CopyN(s, c, limit)
				if n == limit {
					p.mu.Lock()
					p.n++
					p.mu.Unlock()
				}
			}()
		}
	}()
	return p
}

// s3Config configures cfg for the S3-compatible server PARLEY_TEST_S3 names
// (http://ACCESS:SECRET@HOST:PORT/BUCKET, see .ci/s3.sh), each test under a
// prefix of its own; the test is skipped without it.
func s3Config(t *testing.T) func(*server.Config) {
	t.Helper()
	raw := os.Getenv("PARLEY_TEST_S3")
	if raw == "" {
		t.Skip("PARLEY_TEST_S3 is unset: no S3-compatible server to test against (bash .ci/s3.sh starts one)")
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		t.Fatalf("PARLEY_TEST_S3 %q is not http://ACCESS:SECRET@HOST:PORT/BUCKET", raw)
	}
	secret, _ := u.User.Password()
	prefix := fmt.Sprintf("server-test-%d/", time.Now().UnixNano())
	return func(c *server.Config) {
		c.MediaS3Endpoint, c.MediaS3Bucket = u.Scheme+"://"+u.Host, strings.Trim(u.Path, "/")
		c.MediaS3AccessKey, c.MediaS3SecretKey, c.MediaS3PathStyle, c.MediaS3Prefix = u.User.Username(), secret, true, prefix
	}
}

// TestMediaOnS3: with files in an S3 bucket, an upload (one request and
// resumable, cut on the way) is sent and downloaded through a presigned URL
// of the bucket itself, byte for byte and by range; the thumbnail too.
func TestMediaOnS3(t *testing.T) {
	ts := startServer(t, s3Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "web", transports[0])

	pic := testPNG(t, 400, 300)
	att, err := ts.http().UploadFile(ctx, tok, "pic.png", bytes.NewReader(pic), int64(len(pic)))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 6<<20+777)
	_, _ = rand.Read(big)
	cut := newCuttingProxy(t, ts.HTTPAddr(), 1<<20)
	bigID, err := client.HTTPClient{BaseURL: "http://" + cut.addr}.UploadResumable(ctx, tok, "big.bin", bytes.NewReader(big),
		int64(len(big)), client.ResumableOptions{ChunkBytes: 2 << 20, Attempts: 8})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := alice.Send(ctx, &pb.Send{To: "bob", Attachments: []*pb.Attachment{{Id: att.Id}, {Id: bigID}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id    string
		thumb bool
		want  []byte
	}{{att.Id, false, pic}, {bigID, false, big}, {att.Id, true, nil}} {
		u, err := bob.FileURL(ctx, c.id, ack.ConversationId, ack.Seq, c.thumb)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(u.Url, "http://127.0.0.1") || strings.Contains(u.Url, ts.HTTPAddr()) {
			t.Fatalf("URL %s is not the bucket's", u.Url)
		}
		status, _, body := ts.fetch(t, u.Url, "")
		switch {
		case status != 200:
			t.Fatalf("download %s: %d", c.id, status)
		case c.want != nil && !bytes.Equal(body, c.want):
			t.Fatalf("download %s: %d bytes differ from the %d uploaded", c.id, len(body), len(c.want))
		case c.want == nil:
			if _, err := jpeg.Decode(bytes.NewReader(body)); err != nil {
				t.Fatalf("thumbnail: %v", err)
			}
		}
		if c.want != nil {
			if status, _, part := ts.fetch(t, u.Url, "bytes=5-104"); status != http.StatusPartialContent || !bytes.Equal(part, c.want[5:105]) {
				t.Fatalf("range of %s: %d", c.id, status)
			}
		}
	}
}

// slowReader gives its bytes in small pieces, a pause before each.
type slowReader struct {
	b     []byte
	piece int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := copy(p[:min(len(p), s.piece)], s.b)
	s.b = s.b[n:]
	return n, nil
}

// TestSlowUploadOutlastsTheReadTimeout: an upload whose body keeps coming
// is not cut by http_read_timeout (which bounds other requests whole), as
// a large file on a slow link takes longer than that.
func TestSlowUploadOutlastsTheReadTimeout(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.HTTPReadTimeout, c.HTTPHeaderTimeout = time.Second, time.Second })
	tok := ts.mint(t, "alice")
	data := bytes.Repeat([]byte("slow but steady\n"), 16<<10) // 256 KiB in 64 pieces over ~2.5 s
	a, err := ts.http().UploadFile(ctx10(t), tok, "slow.txt", &slowReader{b: data, piece: 4 << 10, pause: 40 * time.Millisecond}, int64(len(data)))
	if err != nil {
		t.Fatalf("a steady upload longer than http_read_timeout: %v", err)
	}
	if a.Size != int64(len(data)) {
		t.Fatalf("recorded %d bytes of %d", a.Size, len(data))
	}
}

// TestFileURLExpires: a download URL stops working at its expiry, and a
// very long name is cut, not refused.
func TestFileURLExpires(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.MediaURLTTL = time.Second })
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	data := []byte("expiring text")
	long := strings.Repeat("ü", 300) + ".txt" // 604 bytes
	a, err := ts.http().UploadFile(ctx, tok, long, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Name) > 255 || !strings.HasPrefix(a.Name, "üü") || !utf8.ValidString(a.Name) {
		t.Fatalf("a 604-byte name became %q (%d bytes)", a.Name, len(a.Name))
	}
	u, err := alice.FileURL(ctx, a.Id, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := ts.fetch(t, u.Url, ""); status != 200 {
		t.Fatalf("fresh URL: %d", status)
	}
	time.Sleep(time.Until(time.UnixMilli(u.ExpiresAt)) + 1100*time.Millisecond)
	if status, _, _ := ts.fetch(t, u.Url, ""); status != http.StatusForbidden {
		t.Fatalf("expired URL: %d, want 403", status)
	}
}

// TestAbandonedUploadsAreCollected: a resumable upload started and never
// finished is removed with the unattached files; a finished one is not.
func TestAbandonedUploadsAreCollected(t *testing.T) {
	if raceDetector {
		// tusd v2.9.1 has a data race of its own on a request cut short
		// (.ci/run says where), and this test cuts one on purpose; it runs
		// in the pass without the race detector.
		t.Skip("cuts a resumable upload short, which races inside tusd v2.9.1; run without -race")
	}
	ts := startServer(t, nil)
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	data := bytes.Repeat([]byte("half of it\n"), 20000)
	var loc string
	cctx, cancel := context.WithCancel(ctx)
	_, err := ts.http().UploadResumable(cctx, tok, "half.txt", &cancelAfter{r: bytes.NewReader(data), at: int64(len(data) / 2), cancel: cancel},
		int64(len(data)), client.ResumableOptions{ChunkBytes: int64(len(data) / 2), OnCreated: func(l string) { loc = l }})
	if err == nil || loc == "" {
		t.Fatalf("the upload was to stop half way: %v (%q)", err, loc)
	}
	head := func() int {
		req, _ := http.NewRequest(http.MethodHead, loc, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Tus-Resumable", "1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := head(); s != http.StatusOK {
		t.Fatalf("the half upload: HEAD %d", s)
	}
	done, err := ts.http().UploadResumable(ctx, tok, "whole.txt", bytes.NewReader(data), int64(len(data)), client.ResumableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	if _, err := alice.Send(ctx, &pb.Send{To: "bob", Attachments: []*pb.Attachment{{Id: done}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.CollectMediaForTest(time.Now().Add(25 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s := head(); s != http.StatusNotFound {
		t.Fatalf("the abandoned upload after collection: HEAD %d, want 404", s)
	}
	u, err := alice.FileURL(ctx, done, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := ts.fetch(t, u.Url, ""); status != 200 || !bytes.Equal(body, data) {
		t.Fatalf("the finished, sent upload after collection: %d, %d bytes", status, len(body))
	}
}

// TestFinishedUploadCannotBeDeleted: the bytes of a finished resumable
// upload are a file that messages carry; a DELETE of the upload is refused
// and the file stays readable.
func TestFinishedUploadCannotBeDeleted(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	data := []byte("a finished file")
	var loc string
	id, err := ts.http().UploadResumable(ctx, tok, "f.txt", bytes.NewReader(data), int64(len(data)),
		client.ResumableOptions{OnCreated: func(l string) { loc = l }})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, loc, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Tus-Resumable", "1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("DELETE of a finished upload: %d, want 409", resp.StatusCode)
	}
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	u, err := alice.FileURL(ctx, id, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := ts.fetch(t, u.Url, ""); status != 200 || !bytes.Equal(body, data) {
		t.Fatalf("the file after the refused DELETE: %d, %q", status, body)
	}
}

// cancelAfter reads r and cancels its context once at bytes are read.
type cancelAfter struct {
	r      io.ReaderAt
	at     int64
	cancel func()
}

func (c *cancelAfter) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.at {
		c.cancel()
		return 0, context.Canceled
	}
	return c.r.ReadAt(p, off)
}
