package xcoll

import (
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
)

// The collectives of this file (Scatter, Alltoall, the v-forms, Scan, Exscan,
// ReduceScatterBlock, ReduceScatter) move blocks of their own sizes between ranks, which a local
// Gather of equal blocks cannot carry to the leader. They share one shape instead:
// every rank of a proc publishes its coll.Part (buffers, counts, displacements) in
// the communicator's slot for the collective and meets the others in a local
// barrier (meet); the leader then reads its proc's parts straight from memory,
// exchanges blocks with the other leaders, and writes the results straight into
// its ranks' receive buffers; the release barrier ends the collective for all of
// them. No rank leaves before the release, so its buffers stay valid while its
// leader uses them, and the barriers order the leader's reads and writes with the
// owners' (the race detector sees it through their atomics).
//
// A message between leaders is a list of blocks (pack): one per rank, or per pair
// of ranks for Alltoall, so that a receiver checks every sender's length against
// the room its own ranks have, as internal/coll's agree does in one proc.

// meet publishes the calling rank's part for its proc's leader (arrive) and waits
// until every rank of the proc has published its own; the leader checks that they
// made its call.
func (o *call) meet(p coll.Part) ([]coll.Part, error) {
	o.arrive()
	o.c.parts[o.at(ring)] = p
	err := o.sameCall(o.fromLocal(o.c.local.Barrier(o.lr)))
	if !o.leader() {
		return nil, err
	}
	// The proc's ranks stay in this call's release until the leader is done,
	// so no rank writes these parts meanwhile: the leader reads them in place.
	first := int(o.seq%ring) * o.c.Local()
	return o.c.parts[first : first+o.c.Local() : first+o.c.Local()], err
}

// lead is a leader's share of a collective of this file: it reads and writes its
// proc's parts, talks to the other leaders, and returns the outcome. Whatever err
// it starts with, it sends every message another leader waits for (a fault
// instead of data) and, unless the job is aborted, receives every message sent to
// it, so that no leader waits for ever and no message is left behind. (A switch
// rather than a function value: through one, the call escaped to the heap, an
// allocation per call.)
func (o *call) lead(ps []coll.Part, err error) error {
	switch o.k {
	case coll.KindScatter, coll.KindScatterv:
		return o.scatter(ps, err)
	case coll.KindGatherv:
		return o.gatherv(ps, err)
	case coll.KindAllgatherv:
		return o.allgatherv(ps, err)
	case coll.KindAlltoall, coll.KindAlltoallv:
		return o.alltoall(ps, err)
	case coll.KindScan, coll.KindExscan:
		return o.scan(ps, err)
	}
	return o.prefix(ps, err) // ReduceScatter(Block)
}

// run runs a collective of this file: meet, the leader's share, the release.
func (c *Comm) run(k kind, rank, root, elem int, fn coll.Op, p coll.Part) error {
	var o call
	c.start(&o, rank, k, root, elem)
	o.fn = fn
	ps, err := o.meet(p)
	if o.leader() {
		err = o.lead(ps, err)
	}
	if o.logged {
		o.finished()
	}
	out, rerr := o.release(err, nil)
	return o.finish(out, worse(err, rerr))
}

// Exchange runs the collective of kind k among those that take a coll.Part, as
// coll.Comm.Exchange does.
func (c *Comm) Exchange(k kind, rank, root, elem int, fn coll.Op, p *coll.Part) error {
	return c.run(k, rank, root, elem, fn, *p)
}

// Scatter sends block r of the root's Send (SendBlock bytes each) to the start of
// rank r's Recv: the root's leader sends each other proc's leader one message with
// its ranks' blocks, which therefore cross the network once.
func (c *Comm) Scatter(rank int, p *coll.Part, elem, root int) error {
	return c.run(coll.KindScatter, rank, root, elem, coll.Op{}, *p)
}

// Scatterv is Scatter with the root's SendCounts and SendDispls.
func (c *Comm) Scatterv(rank int, p *coll.Part, elem, root int) error {
	return c.run(coll.KindScatterv, rank, root, elem, coll.Op{}, *p)
}

// Gatherv puts every rank's Send into block rank of the root's Recv (RecvCounts,
// RecvDispls): every other proc's leader sends the root's leader one message with
// its ranks' sends.
func (c *Comm) Gatherv(rank int, p *coll.Part, elem, root int) error {
	return c.run(coll.KindGatherv, rank, root, elem, coll.Op{}, *p)
}

// Allgatherv puts every rank's Send into block rank of every rank's Recv: the
// leaders gather their ranks' sends to proc index 0, which broadcasts them all
// down the leaders' binomial tree.
func (c *Comm) Allgatherv(rank int, p *coll.Part, elem int) error {
	return c.run(coll.KindAllgatherv, rank, 0, elem, coll.Op{}, *p)
}

// Alltoall sends block j of rank i's Send to block i of rank j's Recv (SendBlock
// and RecvBlock bytes): each leader sends every other leader one message with the
// blocks its ranks send to that proc's ranks, and copies those between its own
// ranks in memory; every block crosses the network once, on the direct link
// between its two procs.
func (c *Comm) Alltoall(rank int, p *coll.Part, elem int) error {
	return c.run(coll.KindAlltoall, rank, 0, elem, coll.Op{}, *p)
}

// Alltoallv is Alltoall with every rank's send and receive counts and
// displacements.
func (c *Comm) Alltoallv(rank int, p *coll.Part, elem int) error {
	return c.run(coll.KindAlltoallv, rank, 0, elem, coll.Op{}, *p)
}

// Scan puts into the start of rank r's Recv the prefix send(0) op send(1) op ...
// op send(r), combined in rank order whatever the layout: the leaders gather
// every rank's Send to proc index 0, which computes every rank's prefix and sends
// each proc's leader its ranks' results. Folding per proc first would need each
// proc's ranks to be consecutive; this costs proc index 0 the whole input, which
// is what a Scan of a non-commutative op over scattered ranks needs anyway.
func (c *Comm) Scan(rank int, p *coll.Part, elem int, fn coll.Op) error {
	return c.run(coll.KindScan, rank, 0, elem, fn, *p)
}

// Exscan is Scan without the rank's own contribution; rank 0's Recv is not
// written.
func (c *Comm) Exscan(rank int, p *coll.Part, elem int, fn coll.Op) error {
	return c.run(coll.KindExscan, rank, 0, elem, fn, *p)
}

// ReduceScatterBlock puts into the start of rank r's Recv the reduction, in rank
// order, of block r (SendBlock bytes) of every rank's Send, the way Scan does:
// proc index 0 computes every block and sends each proc its ranks' blocks.
func (c *Comm) ReduceScatterBlock(rank int, p *coll.Part, elem int, fn coll.Op) error {
	return c.run(coll.KindReduceScatterBlock, rank, 0, elem, fn, *p)
}

// ReduceScatter is ReduceScatterBlock with blocks of their own sizes (SendCounts,
// SendDispls): proc index 0 cuts the blocks as rank 0's counts say, and each
// leader checks that its ranks' blocks have the lengths their own counts say.
func (c *Comm) ReduceScatter(rank int, p *coll.Part, elem int, fn coll.Op) error {
	return c.run(coll.KindReduceScatter, rank, 0, elem, fn, *p)
}

// scatter is the leaders' share of Scatter(v): see Scatter.
func (o *call) scatter(ps []coll.Part, err error) error {
	c := o.c
	ri, mine := c.procOf[o.root], c.members[c.me]
	// take puts rank r's block b at the start of its receive buffer.
	take := func(i, r int, b []byte) error {
		if len(b) > len(ps[i].Recv) {
			return o.fault(errs.Truncate, r, "the root sends %d elements to rank %d, whose receive buffer holds %d", o.els(len(b)), r, o.els(len(ps[i].Recv)))
		}
		coll.Move(ps[i].Recv[:len(b)], b)
		return nil
	}
	var block func(i int) []byte // local rank i's block
	switch {
	case c.me == ri:
		at := &ps[c.lrank[o.root]]
		err = o.scatterFrom(at, err)
		block = func(i int) []byte { return at.SendBlockOf(mine[i]) }
	case c.host != nil:
		var all [][]byte // every rank's blocks
		all, err = o.hostScatterInto(ri, err)
		block = func(i int) []byte { return all[mine[i]] }
	case err != coll.ErrAborted:
		data, rerr := o.recv(ri, tagDirect)
		var blocks [][]byte
		if err = worse(err, rerr); err == nil {
			blocks, err = o.unpack(nil, data, len(mine), ri)
		}
		block = func(i int) []byte { return blocks[i] }
	}
	for i := 0; err == nil && i < len(mine); i++ {
		err = take(i, mine[i], block(i))
	}
	return err
}

// scatterFrom is the root's proc's share of Scatter and Scatterv, whose blocks
// at holds: in host mode it posts every rank's block, in rank order, in its
// entry, for the other procs to copy theirs from as a Bcast's procs do the
// root's data (hostScatterInto); on the channel, or when they do not fit, it
// sends each other proc's leader one message with its ranks' blocks.
func (o *call) scatterFrom(at *coll.Part, err error) error {
	c := o.c
	if c.host != nil {
		if err == coll.ErrAborted {
			return err
		}
		var blob []byte
		if err == nil {
			blob = c.host.pack(c.n, at.SendBlockOf)
		}
		onNet, perr := o.postPart(blob, err)
		o.finished()
		if err = worse(err, perr); err != nil || !onNet {
			return err
		}
	}
	for i := range c.procs {
		if i == c.me {
			continue
		}
		var data []byte
		if err == nil {
			data = pack(mapRanks(c.members[i], at.SendBlockOf))
		}
		if err = o.send(i, tagDirect, data, err); err == coll.ErrAborted {
			return err
		}
	}
	return err
}

// hostScatterInto is the share of Scatter and Scatterv in host mode of a proc
// other than the root's (proc index root): every rank's blocks, by rank, from
// the root's entry or, when they did not fit there, our ranks' from the root's
// message. It posts its own entry only if the root's is not there yet, as
// hostBcastInto does.
func (o *call) hostScatterInto(root int, err error) ([][]byte, error) {
	if err == coll.ErrAborted {
		return nil, err
	}
	c := o.c
	if c.host.entry(o.seq, root).seq().Load() != o.seq+1 {
		if perr := o.post(entNone, 0, nil); perr != nil {
			return nil, perr
		}
	}
	defer o.finished()
	what, data, rerr := o.read(root)
	mine := c.members[c.me]
	switch {
	case rerr != nil:
		return nil, worse(err, rerr)
	case what == entNet:
		data, rerr = o.recvNet(root, tagDirect)
		if err = worse(err, rerr); err != nil {
			return nil, err
		}
		blocks, err := o.unpack(nil, data, len(mine), root)
		if err != nil {
			return nil, err
		}
		all := make([][]byte, c.n)
		for i, r := range mine {
			all[r] = blocks[i]
		}
		return all, nil
	case what != entData:
		return nil, worse(err, o.misses(root))
	case err != nil:
		return nil, err
	}
	all, err := o.unpack(c.host.blocks, data, c.n, root)
	c.host.blocks = all // kept for the next call
	return all, err
}

// gatherv is the leaders' share of Gatherv: see Gatherv.
func (o *call) gatherv(ps []coll.Part, err error) error {
	c := o.c
	ri, mine := c.procOf[o.root], c.members[c.me]
	if c.me != ri {
		var data []byte
		if err == nil {
			data = pack(sends(ps))
		}
		return o.send(ri, tagDirect, data, err)
	}
	at := &ps[c.lrank[o.root]]
	// put puts rank r's send b into its block of the root's receive buffer.
	put := func(r int, b []byte) error {
		if f := o.fits(r, o.root, len(b), at.RecvCountOf(r)); f != nil {
			return f
		}
		coll.Move(at.RecvBlockOf(r), b)
		return nil
	}
	for i := 0; err == nil && i < len(mine); i++ {
		err = put(mine[i], ps[i].Send)
	}
	for i := range c.procs {
		if i == c.me {
			continue
		}
		err = o.blocksFrom(i, len(c.members[i]), err, func(j int, b []byte) error { return put(c.members[i][j], b) })
		if err == coll.ErrAborted {
			return err
		}
	}
	return err
}

// allgatherv is the leaders' share of Allgatherv: see Allgatherv. In host mode
// every proc reads every proc's sends from the segment instead (hostBlobs).
func (o *call) allgatherv(ps []coll.Part, err error) error {
	c := o.c
	var blob []byte
	if err == nil {
		blob = pack(sends(ps))
	}
	if c.host != nil {
		hosted, err := o.hostBlobs(blob, err, func(blobs [][]byte) error {
			all, err := o.byRank(blobs)
			if err != nil {
				return err
			}
			return o.storeAll(ps, all)
		})
		if hosted {
			return err
		}
	}
	blobs, err := o.gather(blob, err)
	var full []byte
	if c.me == 0 && err == nil {
		var all [][]byte
		if all, err = o.byRank(blobs); err == nil {
			full = pack(all)
		}
	}
	if full, err = o.bcast(0, full, err); err != nil {
		return err
	}
	all, err := o.unpack(nil, full, c.n, 0)
	if err != nil {
		return err
	}
	return o.storeAll(ps, all)
}

// storeAll writes every rank's send, all by rank, into the receive buffers of
// this proc's ranks.
func (o *call) storeAll(ps []coll.Part, all [][]byte) error {
	c := o.c
	for i := range ps {
		for r := range c.n {
			if err := o.fits(r, c.members[c.me][i], len(all[r]), ps[i].RecvCountOf(r)); err != nil {
				return err
			}
			coll.Move(ps[i].RecvBlockOf(r), all[r])
		}
	}
	return nil
}

// alltoall is the leaders' share of Alltoall(v): see Alltoall.
func (o *call) alltoall(ps []coll.Part, err error) error {
	c := o.c
	p, mine := len(c.procs), c.members[c.me]
	// put puts block b, from rank src to this proc's local rank di, in its place.
	put := func(src, di int, b []byte) error {
		if f := o.fits(src, mine[di], len(b), ps[di].RecvCountOf(src)); f != nil {
			return f
		}
		coll.Move(ps[di].RecvBlockOf(src), b)
		return nil
	}
	switch {
	case c.host == nil || o.logged: // on the channel, or an Alltoallv through the logs
	case o.blocksFit(ps[0].SendBlock):
		if hosted, herr := o.hostAlltoall(ps, err, put); hosted {
			return herr
		}
	default: // through the logs, where more fits
		o.logs()
	}
	for d := 1; d < p; d++ {
		i := (c.me + d) % p
		var data []byte
		if err == nil {
			blocks := make([][]byte, 0, len(mine)*len(c.members[i]))
			for s := range ps {
				blocks = append(blocks, mapRanks(c.members[i], ps[s].SendBlockOf)...)
			}
			data = pack(blocks)
		}
		if err = o.send(i, tagDirect, data, err); err == coll.ErrAborted {
			return err
		}
	}
	for s := 0; err == nil && s < len(mine); s++ {
		for di := 0; err == nil && di < len(mine); di++ {
			err = put(mine[s], di, ps[s].SendBlockOf(mine[di]))
		}
	}
	for d := 1; d < p; d++ {
		i := (c.me - d + p) % p
		err = o.blocksFrom(i, len(c.members[i])*len(mine), err, func(k int, b []byte) error {
			return put(c.members[i][k/len(mine)], k%len(mine), b)
		})
		if err == coll.ErrAborted {
			return err
		}
	}
	return err
}

// blocksFit says whether every proc's blocks of an Alltoall of m-byte blocks
// fit its entry: judged by our m, the same everywhere when the ranks agree (a
// proc that judges otherwise finds the others' entries are not logs, or they
// that its entry is, as for Scan).
func (o *call) blocksFit(m int) bool {
	for _, ranks := range o.c.members {
		blocks := len(ranks) * o.c.n
		if 8*(1+blocks)+blocks*m > HostData {
			return false
		}
	}
	return true
}

// hostAlltoall is Alltoall's leaders' step in host mode: every
// proc posts all its ranks' blocks, to every rank, in its entry, and copies
// those for its own ranks out of every proc's (hostBlobs), with put. Should a
// proc's blocks not fit its entry after all (blocksFit), every proc sees it and
// the call goes on the channel (hosted false).
func (o *call) hostAlltoall(ps []coll.Part, err error, put func(src, di int, b []byte) error) (hosted bool, _ error) {
	c, h := o.c, o.c.host
	var blob []byte
	if err == nil {
		blob = h.pack(len(ps)*c.n, func(j int) []byte { return ps[j/c.n].SendBlockOf(j % c.n) })
	}
	return o.hostBlobs(blob, err, func(blobs [][]byte) error {
		for i, ranks := range c.members {
			blocks, err := o.unpack(h.blocks, blobs[i], len(ranks)*c.n, i)
			if err != nil {
				return err
			}
			h.blocks = blocks
			for k, src := range ranks {
				for di, d := range c.members[c.me] {
					if err := put(src, di, blocks[k*c.n+d]); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

// blocksFrom receives the list of want blocks that the leader of proc index i
// sends this one straight (tagDirect) and hands each to use, in order, until one
// fails. It receives even when the collective has already failed (err), so that
// nothing is left behind, and returns what the collective carries on with.
func (o *call) blocksFrom(i, want int, err error, use func(k int, b []byte) error) error {
	data, rerr := o.recv(i, tagDirect)
	if err = worse(err, rerr); err != nil {
		return err
	}
	blocks, err := o.unpack(nil, data, want, i)
	for k := 0; err == nil && k < len(blocks); k++ {
		err = use(k, blocks[k])
	}
	return err
}

// prefix is the leaders' share of Scan, Exscan and ReduceScatter(Block): every
// rank's send to proc index 0, which computes every rank's result (results) and
// sends each proc's leader those of its ranks.
func (o *call) prefix(ps []coll.Part, err error) error {
	c := o.c
	mine := c.members[c.me]
	var blob []byte
	if err == nil {
		blob = pack(sends(ps))
	}
	blobs, err := o.gather(blob, err)
	var res [][]byte // by rank at proc index 0; by local rank elsewhere
	if c.me == 0 {
		if err == nil {
			var x [][]byte
			if x, err = o.byRank(blobs); err == nil {
				res, err = o.results(x, &ps[0])
			}
		}
		for i := 1; i < len(c.procs); i++ {
			var data []byte
			if err == nil {
				data = pack(mapRanks(c.members[i], func(r int) []byte { return res[r] }))
			}
			if err = o.send(i, tagDirect, data, err); err == coll.ErrAborted {
				return err
			}
		}
		if err == nil {
			res = mapRanks(mine, func(r int) []byte { return res[r] })
		}
	} else if err != coll.ErrAborted {
		data, rerr := o.recv(0, tagDirect)
		if err = worse(err, rerr); err == nil {
			res, err = o.unpack(nil, data, len(mine), 0)
		}
	}
	if err != nil {
		return err
	}
	return o.store(ps, res)
}

// store writes the results of Scan, Exscan or ReduceScatter(Block) of this
// proc's ranks, res by local rank, into their receive buffers.
func (o *call) store(ps []coll.Part, res [][]byte) error {
	mine := o.c.members[o.c.me]
	for i := range ps {
		b := res[i]
		if o.k == coll.KindReduceScatter && len(b) != ps[i].SendCountOf(mine[i]) {
			return o.fault(errs.Count, 0, "rank %d counts %d elements in its block, rank 0 counts %d", mine[i], o.els(ps[i].SendCountOf(mine[i])), o.els(len(b)))
		}
		if len(b) > len(ps[i].Recv) {
			return o.fault(errs.Count, errs.None, "the receive buffer of rank %d holds %d elements, fewer than the %d of its result", mine[i], o.els(len(ps[i].Recv)), o.els(len(b)))
		}
		coll.Move(ps[i].Recv[:len(b)], b)
	}
	return nil
}

// results computes every rank's result of Scan, Exscan or ReduceScatter(Block) from
// every rank's send, x[r] (of a Scan or Exscan, the first ranks' results from
// theirs), folding in rank order as internal/coll does; ref is rank 0's part,
// whose counts cut the blocks of ReduceScatter.
func (o *call) results(x [][]byte, ref *coll.Part) ([][]byte, error) {
	n := len(x) // every rank's, or for a Scan in host mode those up to the proc's last
	for r := range x {
		if a, b := len(x[0]), len(x[r]); a != b {
			if o.k == coll.KindReduceScatterBlock {
				return nil, o.fault(errs.Count, r, "blocks of %d elements on rank 0 but of %d on rank %d", o.els(a)/n, o.els(b)/n, r)
			}
			return nil, o.fault(errs.Count, r, "rank 0 has %d elements, rank %d has %d", o.els(a), r, o.els(b))
		}
	}
	res := make([][]byte, n)
	if o.k == coll.KindReduceScatterBlock || o.k == coll.KindReduceScatter {
		m := len(x[0]) / n
		block := func(b []byte, r int) []byte { return b[r*m : (r+1)*m] }
		if o.k == coll.KindReduceScatter {
			block = func(b []byte, r int) []byte { return b[ref.SendDispls[r] : ref.SendDispls[r]+ref.SendCounts[r]] }
		}
		for r := range n {
			acc := slices.Clone(block(x[n-1], r))
			for j := n - 2; j >= 0; j-- {
				if err := o.combine(o.fn, block(x[j], r), acc); err != nil {
					return nil, err
				}
			}
			res[r] = acc
		}
		return res, nil
	}
	// acc = x0 op ... op x(r) is the prefix of rank r; the next is acc op x(r+1).
	acc := x[0]
	for r := 1; r < n; r++ {
		res[r-1] = acc
		next := slices.Clone(x[r])
		if err := o.combine(o.fn, acc, next); err != nil {
			return nil, err
		}
		acc = next
	}
	res[n-1] = acc
	if o.k == coll.KindExscan {
		copy(res[1:], res[:n-1])
		res[0] = nil
	}
	return res, nil
}

// byRank unpacks the blobs of gather, by proc index, into every rank's block.
func (o *call) byRank(blobs [][]byte) ([][]byte, error) {
	all := make([][]byte, o.c.n)
	for i, blob := range blobs {
		blocks, err := o.unpack(nil, blob, len(o.c.members[i]), i)
		if err != nil {
			return nil, err
		}
		for j, r := range o.c.members[i] {
			all[r] = blocks[j]
		}
	}
	return all, nil
}

// fits checks that a block of sent bytes from rank from fits the room rank to has
// for it: more is ErrTruncate, fewer ErrCount, as in one proc; for Alltoall, whose
// blocks are all alike, any difference is ErrCount.
func (o *call) fits(from, to, sent, room int) error {
	switch {
	case sent == room:
		return nil
	case o.k == coll.KindAlltoall:
		return o.fault(errs.Count, from, "blocks of %d elements on rank %d but of %d on rank %d", o.els(room), to, o.els(sent), from)
	case sent > room:
		return o.fault(errs.Truncate, from, "rank %d sends %d elements to rank %d, which expects %d", from, o.els(sent), to, o.els(room))
	}
	return o.fault(errs.Count, from, "rank %d sends %d elements to rank %d, which expects %d", from, o.els(sent), to, o.els(room))
}

// els converts bytes to elements of the call.
func (o *call) els(b int) int { return b / max(o.elem, 1) }

// sends returns the send buffers of a proc's parts.
func sends(ps []coll.Part) [][]byte {
	out := make([][]byte, len(ps))
	for i := range ps {
		out[i] = ps[i].Send
	}
	return out
}

// mapRanks returns f(r) for each of ranks.
func mapRanks(ranks []int, f func(r int) []byte) [][]byte {
	out := make([][]byte, len(ranks))
	for i, r := range ranks {
		out[i] = f(r)
	}
	return out
}

// pack makes one message of blocks: their number and lengths (8 bytes each,
// little-endian), then their bytes.
func pack(blocks [][]byte) []byte {
	return packInto(nil, len(blocks), func(j int) []byte { return blocks[j] })
}

// packInto is pack of the n blocks block(0) to block(n-1), appended to out.
func packInto(out []byte, n int, block func(j int) []byte) []byte {
	head := len(out) + 8*(1+n)
	size := head
	for j := range n {
		size += len(block(j))
	}
	out = slices.Grow(out, size-len(out))[:head]
	binary.LittleEndian.PutUint64(out[head-8*(1+n):], uint64(n))
	for j := range n {
		binary.LittleEndian.PutUint64(out[head-8*(n-j):], uint64(len(block(j))))
	}
	for j := range n {
		out = append(out, block(j)...)
	}
	return out
}

// unpack splits what pack made of want blocks, received from the leader of proc
// index from, into dst (reused when it has room); the blocks share data's
// memory. Whatever the bytes, it returns the blocks or an error, never panics:
// data came from another process.
func (o *call) unpack(dst [][]byte, data []byte, want, from int) ([][]byte, error) {
	bad := func(why string) error {
		return o.fault(errs.Intern, o.c.members[from][0], "malformed message from the leader of proc %d: %s", o.c.procs[from], why)
	}
	if len(data) < 8 || binary.LittleEndian.Uint64(data) != uint64(want) || uint64(len(data)/8-1) < uint64(want) {
		return nil, bad("not a list of " + strconv.Itoa(want) + " blocks")
	}
	rest := data[8*(1+want):]
	blocks := slices.Grow(dst[:0], want)[:want]
	for i := range blocks {
		l := binary.LittleEndian.Uint64(data[8*(i+1):])
		if l > uint64(len(rest)) {
			return nil, bad("a block reaches past the message")
		}
		blocks[i], rest = rest[:l:l], rest[l:]
	}
	if len(rest) != 0 {
		return nil, bad("bytes after the last block")
	}
	return blocks, nil
}
