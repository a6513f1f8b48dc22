package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// valid returns one valid header of each kind.
func valid() []Header {
	return []Header{
		{Kind: Eager, Context: 1, Source: 3, Dest: 5, Tag: 7, Frag: 100, Len: 100, SendReq: 11, Seq: 1},
		{Kind: Eager, Flags: FlagSsend, Context: 2, Source: 0, Dest: 1, Tag: 0, SendReq: 12, Seq: 2},
		{Kind: Eager, Flags: FlagReady, Source: 1, Dest: 0, Tag: 1<<31 - 1, Frag: MaxFrag, Len: MaxFrag, SendReq: 1<<64 - 1, Seq: 1<<64 - 1},
		{Kind: RTS, Context: 9, Source: 1, Dest: 2, Tag: 3, Len: 1 << 40, SendReq: 4, Seq: 5},
		{Kind: RTS, Source: 1, Dest: 2, Len: 1 << 20, SendReq: 6, RecvReq: 3, Seq: 6}, // an Ack riding along
		{Kind: Eager, Source: 3, Dest: 5, Frag: 8, Len: 8, SendReq: 13, RecvReq: 12, Seq: 13},
		{Kind: RTS, Flags: FlagSsend, Source: 1, Dest: 2, Len: MaxLen, SendReq: 4},
		{Kind: CTS, Context: 9, Source: 2, Dest: 1, Tag: 3, Len: 1 << 20, SendReq: 4, RecvReq: 8, Seq: 6},
		{Kind: Data, Source: 1, Dest: 2, Len: 1 << 20, Offset: 1 << 19, Frag: 1 << 19, SendReq: 4, RecvReq: 8},
		{Kind: Data, Source: 1, Dest: 2, Len: 0, SendReq: 4, RecvReq: 8},
		{Kind: Ack, Source: 2, Dest: 1, SendReq: 11},
		{Kind: CancelReq, Source: 1, Dest: 2, SendReq: 13},
		{Kind: CancelReply, Flags: FlagCancelled, Source: 2, Dest: 1, SendReq: 13},
		{Kind: CancelReply, Source: 2, Dest: 1, SendReq: 13},
		{Kind: Pull, Source: 2, Dest: 1, Len: 100, SendReq: 11, RecvReq: 21},
		{Kind: Coll, Context: 4, Source: 0, Dest: 3, Tag: -5, Len: 64, Offset: 32, Frag: 32, Seq: 77},
		{Kind: Coll, Context: 4, Source: 0, Dest: 3, SendReq: 1, RecvReq: 2},
		{Kind: Close, Source: 0, Dest: 1, Seq: 1000},
	}
}

func TestRoundTrip(t *testing.T) {
	seen := map[Kind]bool{}
	for _, h := range valid() {
		var b [Size]byte
		h.Put(b[:])
		if b[0] != Version {
			t.Fatalf("version byte %d", b[0])
		}
		got, err := Parse(b[:])
		if err != nil {
			t.Fatalf("%v: Parse: %v", h.Kind, err)
		}
		if got != h {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, h)
		}
		var b2 [Size]byte
		got.Put(b2[:])
		if b != b2 {
			t.Fatalf("%v: re-encoding differs", h.Kind)
		}
		seen[h.Kind] = true
	}
	for k := Kind(1); k <= maxKind; k++ {
		if !seen[k] && k != reservedKind {
			t.Errorf("no round trip for kind %v", k)
		}
	}
}

// reservedKind is the number of a kind that version 1 no longer has.
const reservedKind = 5

func TestKindString(t *testing.T) {
	for k := Kind(1); k <= maxKind; k++ {
		if s := k.String(); (s == "" || strings.HasPrefix(s, "Kind(")) != (k == reservedKind) {
			t.Errorf("kind %d is named %q", k, s)
		}
	}
	if s := Kind(0).String(); s != "Kind(0)" {
		t.Errorf("Kind(0).String() = %q", s)
	}
	if s := Kind(200).String(); s != "Kind(200)" {
		t.Errorf("Kind(200).String() = %q", s)
	}
}

// TestLayout pins the byte offsets documented in docs/protocol.md.
func TestLayout(t *testing.T) {
	h := Header{Kind: Data, Flags: 0, Context: 0x04030201, Source: 0x0a, Dest: 0x0b, Tag: 0x0c,
		Frag: 0x10, Len: 0x20, SendReq: 0x30, RecvReq: 0x40, Seq: 0x50, Offset: 0x08}
	var b [Size]byte
	h.Put(b[:])
	want := map[int]byte{0: Version, 1: byte(Data), 4: 1, 5: 2, 6: 3, 7: 4, 8: 0x0a, 12: 0x0b, 16: 0x0c,
		20: 0x10, 24: 0x20, 32: 0x30, 40: 0x40, 48: 0x50, 56: 0x08}
	for i := 0; i < Size; i++ {
		if b[i] != want[i] {
			t.Errorf("byte %d = %#x, want %#x", i, b[i], want[i])
		}
	}
}

func TestReject(t *testing.T) {
	enc := func(h Header) []byte {
		b := make([]byte, Size)
		h.Put(b)
		return b
	}
	eager := Header{Kind: Eager, Source: 1, Dest: 2, Tag: 3, Frag: 8, Len: 8, SendReq: 1}
	cts := Header{Kind: CTS, Source: 1, Dest: 2, Len: 8, SendReq: 1, RecvReq: 2}
	data := Header{Kind: Data, Source: 1, Dest: 2, Len: 100, Offset: 50, Frag: 50, SendReq: 1, RecvReq: 2}
	with := func(h Header, f func(*Header)) []byte { f(&h); return enc(h) }
	raw := func(h Header, f func([]byte)) []byte { b := enc(h); f(b); return b }

	cases := []struct {
		name  string
		b     []byte
		field string
	}{
		{"empty", nil, "length"},
		{"short", enc(eager)[:Size-1], "length"},
		{"version 0", raw(eager, func(b []byte) { b[0] = 0 }), "Version"},
		{"version 2", raw(eager, func(b []byte) { b[0] = 2 }), "Version"},
		{"kind 0", with(eager, func(h *Header) { h.Kind = 0 }), "Kind"},
		{"kind unknown", with(eager, func(h *Header) { h.Kind = maxKind + 1 }), "Kind"},
		{"kind 255", with(eager, func(h *Header) { h.Kind = 255 }), "Kind"},
		{"reserved", raw(eager, func(b []byte) { b[Size-1] = 1 }), "reserved"},
		{"reserved first", raw(eager, func(b []byte) { b[offReserved] = 0x80 }), "reserved"},
		{"unknown flag", with(eager, func(h *Header) { h.Flags = 1 << 15 }), "Flags"},
		{"ssend and ready", with(eager, func(h *Header) { h.Flags = FlagSsend | FlagReady }), "Flags"},
		{"ssend on CTS", with(cts, func(h *Header) { h.Flags = FlagSsend }), "Flags"},
		{"cancelled on eager", with(eager, func(h *Header) { h.Flags = FlagCancelled }), "Flags"},
		{"negative source", with(eager, func(h *Header) { h.Source = -2 }), "Source"},
		{"negative dest", with(eager, func(h *Header) { h.Dest = -1 }), "Dest"},
		{"negative tag", with(eager, func(h *Header) { h.Tag = -1 }), "Tag"},
		{"len over max", with(Header{Kind: RTS, Source: 1, Dest: 2, SendReq: 1}, func(h *Header) { h.Len = MaxLen + 1 }), "Len"},
		{"frag over max", with(eager, func(h *Header) { h.Frag = MaxFrag + 1; h.Len = MaxFrag + 1 }), "Frag"},
		{"eager frag != len", with(eager, func(h *Header) { h.Frag = 7 }), "Frag"},
		{"eager offset", with(eager, func(h *Header) { h.Offset = 1 }), "Offset"},
		{"eager no sendreq", with(eager, func(h *Header) { h.SendReq = 0 }), "SendReq"},
		{"cancelreq recvreq", with(Header{Kind: CancelReq, Source: 1, Dest: 2, SendReq: 13}, func(h *Header) { h.RecvReq = 5 }), "RecvReq"},
		{"rts payload", with(Header{Kind: RTS, Source: 1, Dest: 2, Len: 8, SendReq: 1}, func(h *Header) { h.Frag = 8 }), "Frag"},
		{"rts no sendreq", with(Header{Kind: RTS, Source: 1, Dest: 2, Len: 8}, func(h *Header) {}), "SendReq"},
		{"cts payload", with(cts, func(h *Header) { h.Frag = 1 }), "Frag"},
		{"cts no recvreq", with(cts, func(h *Header) { h.RecvReq = 0 }), "RecvReq"},
		{"cts no sendreq", with(cts, func(h *Header) { h.SendReq = 0 }), "SendReq"},
		{"cts offset", with(cts, func(h *Header) { h.Offset = 4 }), "Offset"},
		{"data past end", with(data, func(h *Header) { h.Frag = 51 }), "Offset"},
		{"data offset past len", with(data, func(h *Header) { h.Offset = 101; h.Frag = 0 }), "Offset"},
		{"data offset overflow", with(data, func(h *Header) { h.Offset = 1<<64 - 1 }), "Offset"},
		{"data empty frag", with(data, func(h *Header) { h.Frag = 0 }), "Frag"},
		{"data no recvreq", with(data, func(h *Header) { h.RecvReq = 0 }), "RecvReq"},
		{"reserved kind 5", with(Header{Kind: 5, SendReq: 1}, func(h *Header) {}), "Kind"},
		{"ack payload", with(Header{Kind: Ack, SendReq: 1}, func(h *Header) { h.Frag = 1; h.Len = 1 }), "Frag"},
		{"cancelreq recvreq", with(Header{Kind: CancelReq, SendReq: 1}, func(h *Header) { h.RecvReq = 1 }), "RecvReq"},
		{"pull no recvreq", with(Header{Kind: Pull, SendReq: 1, Len: 4}, func(h *Header) {}), "RecvReq"},
		{"coll past end", with(Header{Kind: Coll, Len: 10, Offset: 5, Frag: 6}, func(h *Header) {}), "Offset"},
		{"close len", with(Header{Kind: Close}, func(h *Header) { h.Len = 1 }), "Len"},
		{"close sendreq", with(Header{Kind: Close}, func(h *Header) { h.SendReq = 1 }), "SendReq"},
		{"close recvreq", with(Header{Kind: Close}, func(h *Header) { h.RecvReq = 1 }), "RecvReq"},
	}
	for _, c := range cases {
		_, err := Parse(c.b)
		if err == nil {
			t.Errorf("%s: Parse accepted", c.name)
			continue
		}
		if !errors.Is(err, ErrHeader) {
			t.Errorf("%s: error %v is not ErrHeader", c.name, err)
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %q does not name field %s", c.name, err, c.field)
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: message %q does not name field %s", c.name, err, c.field)
		}
	}
}

func TestParseIgnoresTrailingBytes(t *testing.T) {
	h := valid()[0]
	b := make([]byte, Size+10)
	h.Put(b)
	for i := Size; i < len(b); i++ {
		b[i] = 0xff
	}
	if got, err := Parse(b); err != nil || got != h {
		t.Fatalf("Parse with trailing bytes: %+v, %v", got, err)
	}
}

func TestPutNoAlloc(t *testing.T) {
	h := valid()[0]
	b := make([]byte, Size)
	if n := testing.AllocsPerRun(1000, func() { h.Put(b) }); n != 0 {
		t.Fatalf("Put allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = Parse(b) }); n != 0 {
		t.Fatalf("Parse of a valid header allocates %v times", n)
	}
}

func TestPutOverwritesReserved(t *testing.T) {
	b := bytes.Repeat([]byte{0xff}, Size)
	h := valid()[0]
	h.Put(b)
	if binary.LittleEndian.Uint64(b[offReserved:]) != 0 {
		t.Fatal("Put left reserved bytes dirty")
	}
	if _, err := Parse(b); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	for _, h := range valid() {
		b := make([]byte, Size)
		h.Put(b)
		f.Add(b)
	}
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrHeader) {
				t.Fatalf("error %v is not ErrHeader", err)
			}
			return
		}
		var out [Size]byte
		h.Put(out[:])
		if !bytes.Equal(out[:], b[:Size]) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b[:Size], out)
		}
		if err := h.Check(); err != nil {
			t.Fatalf("parsed header fails Check: %v", err)
		}
	})
}

func BenchmarkPut(b *testing.B) {
	h := valid()[0]
	buf := make([]byte, Size)
	for b.Loop() {
		h.Put(buf)
	}
}

func BenchmarkParse(b *testing.B) {
	h := valid()[0]
	buf := make([]byte, Size)
	h.Put(buf)
	for b.Loop() {
		_, _ = Parse(buf)
	}
}
