package fuzz

import (
	"math/rand/v2"
	"testing"
)

// TestShardsAreDisjointAndCover: every input is in exactly one of N shards,
// and each shard gets a share.
func TestShardsAreDisjointAndCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := make([][]byte, 2000)
	for i := range inputs {
		inputs[i] = make([]byte, rng.IntN(40))
		for j := range inputs[i] {
			inputs[i][j] = byte(rng.Uint32())
		}
	}
	for n := 1; n <= 6; n++ {
		per := make([]int, n)
		for _, in := range inputs {
			owners := 0
			for k := range n {
				if (Shard{k, n}).Keeps(in) {
					owners++
					per[k]++
				}
			}
			if owners != 1 {
				t.Fatalf("N=%d: input %x is in %d shards, want 1", n, in, owners)
			}
		}
		for k, c := range per {
			if c < len(inputs)/n/2 {
				t.Errorf("N=%d: shard %d got %d of %d inputs", n, k, c, len(inputs))
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"": {0, 1}, "0/1": {0, 1}, "2/4": {2, 4}} {
		if got, err := ParseShard(in); err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"4/4", "-1/4", "1", "a/b", "1/0"} {
		if _, err := ParseShard(in); err == nil {
			t.Errorf("ParseShard(%q): accepted", in)
		}
	}
}

// TestShardsOwnSchedules: in every space, each input's schedule is owned by
// exactly one of N shards, two inputs that decode to the same schedule have
// the same owner, and raw bytes alone would not give that (the test fails if
// Owns hashes the input rather than its schedule).
func TestShardsOwnSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, space := range []Space{LagOnly, LagAndLoss, Realistic, AnchoredLoss} {
		s := testScenario
		s.Space = space
		split := 0 // inputs whose raw bytes and schedule hash into different shards
		for range 1000 {
			in := make([]byte, rng.IntN(48))
			for j := range in {
				in[j] = byte(rng.Uint32())
			}
			canon := s.Encode(s.Decode(in))
			for n := 2; n <= 5; n++ {
				owners := 0
				for k := range n {
					sh := Shard{k, n}
					if sh.Owns(s, in) {
						owners++
						if !sh.Owns(s, canon) {
							t.Fatalf("%v, N=%d: %x and %x decode to the same schedule %s but only the first is in shard %d", space, n, in, canon, s.Decode(in), k)
						}
					}
					if sh.Keeps(in) != sh.Owns(s, in) {
						split++
					}
				}
				if owners != 1 {
					t.Fatalf("%v, N=%d: input %x is owned by %d shards, want 1", space, n, in, owners)
				}
			}
		}
		if split == 0 {
			t.Errorf("%v: no input's raw bytes hashed differently from its schedule: the test cannot tell the two apart", space)
		}
	}
}
