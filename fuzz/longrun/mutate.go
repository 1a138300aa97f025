package longrun

import (
	"bytes"
	"math/rand/v2"
)

// MaxInput bounds a mutated input's length, in bytes: a scenario decodes
// at most a few dozen records, and what lies beyond them means nothing.
const MaxInput = 512

// interesting are boundary byte values: a field's smallest and largest,
// and the edges of a signed byte.
var interesting = []byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff}

// mutate returns a mutation of in: one to three edits, splicing from
// others when it picks a splice. The result differs from in (after a
// bounded number of tries it is in with one byte appended) and is at most
// MaxInput bytes.
func mutate(r *rand.Rand, in []byte, others [][]byte) []byte {
	for try := 0; try < 8; try++ {
		out := bytes.Clone(in)
		for n := 1 + r.IntN(3); n > 0; n-- {
			out = edit(r, out, others)
		}
		if len(out) > MaxInput {
			out = out[:MaxInput]
		}
		if !bytes.Equal(out, in) {
			return out
		}
	}
	if len(in) >= MaxInput {
		out := bytes.Clone(in)
		out[r.IntN(len(out))] ^= 1 << r.IntN(8)
		return out
	}
	return append(bytes.Clone(in), byte(r.IntN(256)))
}

// edit makes one edit to b.
func edit(r *rand.Rand, b []byte, others [][]byte) []byte {
	if len(b) == 0 {
		return append(b, byte(r.IntN(256)))
	}
	i := r.IntN(len(b))
	switch r.IntN(8) {
	case 0: // a bit flipped
		b[i] ^= 1 << r.IntN(8)
	case 1: // a random byte
		b[i] = byte(r.IntN(256))
	case 2: // a boundary value
		b[i] = interesting[r.IntN(len(interesting))]
	case 3: // moved by a few: the next anchor, a slightly later window
		b[i] += byte(r.IntN(9) - 4)
	case 4: // bytes inserted
		ins := make([]byte, 1+r.IntN(6))
		for k := range ins {
			ins[k] = byte(r.IntN(256))
		}
		b = append(b[:i], append(ins, b[i:]...)...)
	case 5: // a range deleted
		j := min(len(b), i+1+r.IntN(6))
		b = append(b[:i], b[j:]...)
	case 6: // a 6-byte record repeated: two faults where there was one
		j := min(len(b), i+6)
		rec := bytes.Clone(b[i:j])
		b = append(b[:j], append(rec, b[j:]...)...)
	case 7: // a part of another entry spliced in
		if len(others) == 0 {
			b[i] = byte(r.IntN(256))
			break
		}
		o := others[r.IntN(len(others))]
		if len(o) == 0 {
			break
		}
		from := r.IntN(len(o))
		part := o[from:min(len(o), from+1+r.IntN(12))]
		if r.IntN(2) == 0 {
			b = append(b[:i], append(bytes.Clone(part), b[i:]...)...)
		} else {
			n := copy(b[i:], part)
			b = append(b, part[n:]...)
		}
	}
	return b
}
