package e2ee

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func vec(b []byte) []byte {
	switch n := len(b); {
	case n < 64:
		return append([]byte{byte(n)}, b...)
	case n < 16384:
		return append(binary.BigEndian.AppendUint16(nil, uint16(n)|0x4000), b...)
	default:
		return append(binary.BigEndian.AppendUint32(nil, uint32(n)|0x80000000), b...)
	}
}

func private(group []byte, epoch uint64, ct byte, ciphertext []byte) []byte {
	b := append([]byte{0, 1, 0, 2}, vec(group)...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, ct)
	b = append(b, vec(nil)...)
	b = append(b, vec([]byte("sd"))...)
	return append(b, vec(ciphertext)...)
}

func public(group []byte, epoch uint64, senderType byte, ct byte) []byte {
	b := append([]byte{0, 1, 0, 1}, vec(group)...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, senderType)
	if senderType == 1 || senderType == 2 {
		b = append(b, 0, 0, 0, 7)
	}
	b = append(b, vec([]byte("aad"))...)
	b = append(b, ct)
	return append(b, vec([]byte("content"))...)
}

func TestParseMessage(t *testing.T) {
	long := bytes.Repeat([]byte("g"), 300) // a two-byte length
	for _, tc := range []struct {
		name string
		in   []byte
		want Framing
	}{
		{"private application", private([]byte("g:1"), 7, 1, []byte("ct")), Framing{WirePrivateMessage, []byte("g:1"), 7, ContentApplication}},
		{"private, long group id", private(long, 1, 2, bytes.Repeat([]byte("c"), 20000)), Framing{WirePrivateMessage, long, 1, ContentProposal}},
		{"public commit", public([]byte("g:1"), 3, 1, 3), Framing{WirePublicMessage, []byte("g:1"), 3, ContentCommit}},
		{"public external commit", public([]byte("g:1"), 3, 4, 3), Framing{WirePublicMessage, []byte("g:1"), 3, ContentCommit}},
	} {
		got, err := ParseMessage(tc.in)
		if err != nil || got.WireFormat != tc.want.WireFormat || !bytes.Equal(got.GroupID, tc.want.GroupID) ||
			got.Epoch != tc.want.Epoch || got.ContentType != tc.want.ContentType {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	ok := private([]byte("g:1"), 7, 1, []byte("ct"))
	nonMinimal := append([]byte{0, 1, 0, 2, 0x40, 3}, []byte("g:1")...)
	nonMinimal = append(nonMinimal, ok[8:]...)
	for name, in := range map[string][]byte{
		"empty":           nil,
		"version 2":       append([]byte{0, 2}, ok[2:]...),
		"welcome":         append([]byte{0, 1, 0, 3}, ok[4:]...),
		"truncated":       ok[:len(ok)-1],
		"trailing bytes":  append(append([]byte(nil), ok...), 0),
		"content type 0":  private([]byte("g:1"), 7, 0, []byte("ct")),
		"content type 4":  private([]byte("g:1"), 7, 4, []byte("ct")),
		"empty group":     private(nil, 7, 1, []byte("ct")),
		"no ciphertext":   private([]byte("g:1"), 7, 1, nil),
		"sender type 9":   public([]byte("g:1"), 3, 9, 3),
		"non-minimal len": nonMinimal,
		"8-byte length":   append([]byte{0, 1, 0, 2, 0xc0}, bytes.Repeat([]byte{0}, 20)...),
		"length too long": append([]byte{0, 1, 0, 2, 0x3f}, []byte("short")...),
	} {
		if f, err := ParseMessage(in); err == nil {
			t.Errorf("%s: parsed as %+v", name, f)
		}
	}
}

func TestCheckKeyPackageAndWelcome(t *testing.T) {
	kp := append([]byte{0, 1, 0, 5, 0, 1, 0, 1}, vec([]byte("init"))...)
	kp = append(kp, vec([]byte("rest"))...)
	if err := CheckKeyPackage(kp); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"no rest":      kp[:8+5],
		"suite 0":      append(append([]byte{0, 1, 0, 5, 0, 1, 0, 0}, vec([]byte("init"))...), 1),
		"private msg":  private([]byte("g"), 1, 1, []byte("c")),
		"no init key":  []byte{0, 1, 0, 5, 0, 1, 0, 1, 0, 1},
		"short header": []byte{0, 1, 0},
	} {
		if CheckKeyPackage(in) == nil {
			t.Errorf("key package %s accepted", name)
		}
	}
	w := append(append([]byte{0, 1, 0, 3, 0, 1}, vec([]byte("secrets"))...), vec([]byte("gi"))...)
	if err := CheckWelcome(w); err != nil {
		t.Fatal(err)
	}
	if CheckWelcome(append(w, 0)) == nil || CheckWelcome(w[:len(w)-1]) == nil || CheckWelcome(kp) == nil {
		t.Error("a bad Welcome was accepted")
	}
}

// FuzzParse: no input panics or reads past its end.
func FuzzParse(f *testing.F) {
	f.Add(private([]byte("g:1"), 7, 1, []byte("ct")))
	f.Add(public([]byte("g:1"), 3, 1, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		if fr, err := ParseMessage(b); err == nil && len(fr.GroupID) > len(b) {
			t.Fatal("group id longer than the input")
		}
		_ = CheckKeyPackage(b)
		_ = CheckWelcome(b)
	})
}
