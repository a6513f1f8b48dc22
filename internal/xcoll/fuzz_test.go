package xcoll

import (
	"encoding/binary"
	"errors"
	"iter"
	"maps"
	"testing"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// FuzzDeliver feeds one proc's collective channel whatever headers and payloads
// another proc could send it: every fragment must be stored or refused with an
// error, never panic, and allocate no more than twice what was sent (plus the
// eager allocation of each message); every whole message must then be received
// as sent, and Lost must end the waits left.
//
// The input is a list of fragments: a 15-byte header (kind: Coll unless the low
// three bits are set; context, collective, step, sender, signature, fault,
// offset, fragment length) and a uvarint claimed message length, then the payload bytes, fewer than claimed at the input's end.
func FuzzDeliver(f *testing.F) {
	f.Add(frag(wire.Coll, 1, 1, tagUp, 0, 0, 3, 3, "abc"))
	f.Add(append(frag(wire.Coll, 1, 1, tagUp, 0, 0, 2, 5, "ab"), frag(wire.Coll, 1, 1, tagUp, 0, 2, 3, 5, "cde")...))
	f.Add(append(frag(wire.Coll, 1, 1, tagUp, 0, 0, 2, 5, "ab"), frag(wire.Coll, 1, 1, tagUp, 0, 2, 9, 5, "cdefghijk")...))
	f.Add(append(frag(wire.Coll, 1, 1, tagUp, 0, 0, 1, 1, "a"), frag(wire.Coll, 1, 1, tagUp, 0, 0, 1, 1, "a")...))
	f.Add(frag(wire.Coll, 2, 9, tagAlarm, 1, 0, 0, 0, ""))
	f.Add(frag(wire.Coll, 2, 9, tagDown, 1, 0, 4, 1<<62, "abcd"))
	f.Add(frag(wire.Coll, 2, 9, tagDown, 1, 0, 4, 1<<39, "abcd"))
	f.Add(frag(wire.Eager, 2, 9, tagDown, 1, 0, 4, 4, "abcd"))
	f.Fuzz(func(t *testing.T, in []byte) {
		n := NewNet(0, make(chan struct{}), nil)
		n.eager = 1 << 10
		sent := 0
		type key struct {
			proc int
			h    wire.Header
		}
		var whole []key
		for len(in) >= 16 {
			h := wire.Header{Kind: wire.Coll, Context: uint32(in[1] % 4), Seq: uint64(in[2] % 4), Tag: int32(in[3]%8) - 1,
				SendReq: uint64(in[5] % 3), RecvReq: uint64(in[6] % 2), Offset: uint64(binary.LittleEndian.Uint32(in[7:])),
				Frag: uint32(binary.LittleEndian.Uint32(in[11:]) % (1 << 20))}
			if in[0]&7 == 7 { // another kind, which does not belong on this channel
				h.Kind = wire.Kind(in[0] >> 3)
			}
			proc := int(in[4] % 4)
			l, k := binary.Uvarint(in[15:])
			if k <= 0 {
				return
			}
			h.Len, in = l, in[15+k:]
			body := in[:min(len(in), int(h.Frag))]
			in = in[len(body):]
			err := n.deliver(proc, &h, func(b []byte) error {
				if len(b) > len(body) {
					return errors.New("the connection ends")
				}
				copy(b, body)
				body, sent = body[len(b):], sent+len(b)
				return nil
			})
			if err != nil {
				break // the job ends: the connection is closed
			}
			if bx := n.allBoxes()[name{h.Context, h.Seq, h.Tag, proc}]; bx != nil && bx.whole {
				whole = append(whole, key{proc, h})
			}
		}
		held, boxes := 0, n.allBoxes()
		for _, b := range boxes {
			held += cap(b.buf)
		}
		if held > 2*sent+len(boxes)*n.eager {
			t.Fatalf("%d bytes held for %d sent in %d messages", held, sent, len(boxes))
		}
		for _, w := range whole {
			m, err := n.Recv(w.proc, w.h.Context, w.h.Seq, w.h.Tag, w.h.SendReq)
			if err != nil || uint64(len(m.Data)) != w.h.Len || m.Sig != w.h.SendReq || m.Fault != w.h.RecvReq {
				t.Fatalf("message %+v from %d received as %d bytes, sig %d, fault %d, %v", w.h, w.proc, len(m.Data), m.Sig, m.Fault, err)
			}
		}
		n.Lost(1, errors.New("gone"))
		for k, b := range n.allBoxes() {
			n.mu.Lock()
			whole := b.whole
			n.mu.Unlock()
			if _, err := n.Recv(k.proc, k.ctx, k.seq, k.tag, 0); err == nil && !whole {
				t.Fatalf("a Recv of an unfinished message returned after Lost without an error")
			}
		}
	})
}

// allBoxes returns every message n holds, by name.
func (n *Net) allBoxes() map[name]*box {
	n.mu.Lock()
	defer n.mu.Unlock()
	all := map[name]*box{}
	for _, calls := range []iter.Seq[*mailbox]{maps.Values(n.calls), maps.Values(n.aliases)} {
		for m := range calls {
			for _, b := range m.boxes {
				all[name{m.key.ctx, m.key.seq, b.tag, b.proc}] = b
			}
		}
	}
	return all
}

// frag encodes one fragment of FuzzDeliver's input.
func frag(kind wire.Kind, ctx, seq byte, tag int32, proc byte, off, fragLen uint32, length uint64, payload string) []byte {
	k := byte(0) // Coll
	if kind != wire.Coll {
		k = byte(kind)<<3 | 7
	}
	b := []byte{k, ctx, seq, byte(tag + 1), proc, 1, 0}
	b = binary.LittleEndian.AppendUint32(b, off)
	b = binary.LittleEndian.AppendUint32(b, fragLen)
	b = binary.AppendUvarint(b, length)
	return append(b, payload...)
}
