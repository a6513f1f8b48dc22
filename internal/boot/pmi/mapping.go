package pmi

import (
	"fmt"
	"strconv"
)

// Block is one run of the launcher's host map: Nodes consecutive nodes,
// numbered from FirstNode, each given RanksPerNode consecutive ranks.
// The map (vector,(0,2,4)) is one Block{0, 2, 4}: ranks 0-3 on node 0 and
// ranks 4-7 on node 1.
type Block struct {
	FirstNode    int
	Nodes        int
	RanksPerNode int
}

// Bounds on what ParseMapping accepts, so that hostile or corrupt text cannot
// make it allocate without limit. They are far above any real job.
const (
	maxMappingNum    = 1 << 24 // largest number in a map
	maxMappingBlocks = 1 << 16 // most blocks after expanding [...]xN
)

// ParseMapping parses the value of PMI_process_mapping.
//
// The grammar (MPICH's; Hydra and Slurm write its simple forms) is
//
//	mapping = "(vector" *("," item) ")"
//	item    = block / "[" block *("," block) "]x" num
//	block   = "(" num "," num "," num ")" / num
//
// A triple is (first node, nodes, ranks per node); a bare num n means (n,1,1);
// "[b1,b2]x3" is the bracketed list repeated 3 times and is expanded here.
// Spaces between tokens are allowed. Nodes and RanksPerNode must be positive.
func ParseMapping(s string) ([]Block, error) {
	p := mapParser{s: s}
	blocks, err := p.parse()
	if err != nil {
		return nil, fmt.Errorf("%w: PMI_process_mapping %q: %v", ErrProtocol, clip(s), err)
	}
	return blocks, nil
}

type mapParser struct {
	s   string
	pos int
}

func (p *mapParser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *mapParser) peek() byte {
	p.skip()
	if p.pos >= len(p.s) {
		return 0
	}
	return p.s[p.pos]
}

func (p *mapParser) expect(lit string) error {
	p.skip()
	if len(p.s)-p.pos < len(lit) || p.s[p.pos:p.pos+len(lit)] != lit {
		return fmt.Errorf("expected %q at offset %d", lit, p.pos)
	}
	p.pos += len(lit)
	return nil
}

func (p *mapParser) num() (int, error) {
	p.skip()
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
		if p.pos-start > 9 {
			return 0, fmt.Errorf("number at offset %d is too long", start)
		}
	}
	if start == p.pos {
		return 0, fmt.Errorf("expected a number at offset %d", start)
	}
	n, _ := strconv.Atoi(p.s[start:p.pos])
	if n > maxMappingNum {
		return 0, fmt.Errorf("number %d at offset %d exceeds %d", n, start, maxMappingNum)
	}
	return n, nil
}

// block parses a triple or a bare node number.
func (p *mapParser) block() (Block, error) {
	if p.peek() != '(' {
		n, err := p.num()
		return Block{FirstNode: n, Nodes: 1, RanksPerNode: 1}, err
	}
	p.pos++
	var v [3]int
	for i := range v {
		if i > 0 {
			if err := p.expect(","); err != nil {
				return Block{}, err
			}
		}
		n, err := p.num()
		if err != nil {
			return Block{}, err
		}
		v[i] = n
	}
	if err := p.expect(")"); err != nil {
		return Block{}, err
	}
	if v[1] == 0 || v[2] == 0 {
		return Block{}, fmt.Errorf("block (%d,%d,%d) has no ranks", v[0], v[1], v[2])
	}
	return Block{FirstNode: v[0], Nodes: v[1], RanksPerNode: v[2]}, nil
}

func (p *mapParser) parse() ([]Block, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	if err := p.expect("vector"); err != nil {
		return nil, err
	}
	var out []Block
	for p.peek() == ',' {
		p.pos++
		if p.peek() != '[' {
			b, err := p.block()
			if err != nil {
				return nil, err
			}
			out = append(out, b)
			if len(out) > maxMappingBlocks {
				return nil, fmt.Errorf("more than %d blocks", maxMappingBlocks)
			}
			continue
		}
		p.pos++
		var group []Block
		for {
			b, err := p.block()
			if err != nil {
				return nil, err
			}
			group = append(group, b)
			if len(group) > maxMappingBlocks {
				return nil, fmt.Errorf("more than %d blocks", maxMappingBlocks)
			}
			if p.peek() != ',' {
				break
			}
			p.pos++
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		if err := p.expect("x"); err != nil {
			return nil, err
		}
		times, err := p.num()
		if err != nil {
			return nil, err
		}
		if len(out)+len(group)*times > maxMappingBlocks {
			return nil, fmt.Errorf("repeat expands to more than %d blocks", maxMappingBlocks)
		}
		for range times {
			out = append(out, group...)
		}
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	if p.peek() != 0 {
		return nil, fmt.Errorf("trailing text at offset %d", p.pos)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no blocks")
	}
	return out, nil
}

// ExpandMapping returns the node index of each of size ranks.
//
// When the blocks describe fewer ranks than size, the pattern repeats from
// its first block. Hydra relies on this: with no host file it describes one
// round of its host list, so `mpiexec -n 3` on one host reports
// (vector,(0,1,1)), which means all three ranks on node 0.
func ExpandMapping(blocks []Block, size int) ([]int, error) {
	if size < 0 {
		return nil, fmt.Errorf("pmi: ExpandMapping: negative size %d", size)
	}
	if size > 0 && len(blocks) == 0 {
		return nil, fmt.Errorf("pmi: ExpandMapping: no blocks for %d ranks", size)
	}
	for _, b := range blocks {
		if b.FirstNode < 0 || b.Nodes <= 0 || b.RanksPerNode <= 0 {
			return nil, fmt.Errorf("pmi: ExpandMapping: invalid block %+v", b)
		}
	}
	nodes := make([]int, 0, size)
	for len(nodes) < size {
		for _, b := range blocks {
			for n := 0; n < b.Nodes; n++ {
				for r := 0; r < b.RanksPerNode; r++ {
					if len(nodes) == size {
						return nodes, nil
					}
					nodes = append(nodes, b.FirstNode+n)
				}
			}
		}
	}
	return nodes, nil
}
