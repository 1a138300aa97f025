package fuzz

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
)

// Shard is one of N disjoint parts of a campaign's search (STALEFUZZ_SHARD
// "K/N", 0 ≤ K < N). While fuzzing, a shard executes only the schedules it
// owns: those whose canonical input (the schedule the input decodes to,
// encoded again) hashes to K modulo N. That holds for its seeds (the
// scenario's, the no-fault ones and those derived from reference runs) and
// for every input go test's mutator hands it: Go does not let a caller seed
// or split its random stream, so a shard skips, before anything runs, each
// mutated input another shard owns. Every schedule is thus executed by
// exactly one of the N shards, and two inputs that decode to the same
// schedule belong to the same shard. A skip costs microseconds against an
// execution's seconds. Corpus entries and findings of N shards merge by
// copying their files into one testdata/fuzz/FuzzXxx directory (Go's corpus
// format); a merged corpus fuzzed as one (0/1) executes everything.
type Shard struct{ K, N int }

// ParseShard reads "K/N". The empty string is the whole search, 0/1.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{0, 1}, nil
	}
	ks, ns, ok := strings.Cut(s, "/")
	k, kerr := strconv.Atoi(ks)
	n, nerr := strconv.Atoi(ns)
	if !ok || kerr != nil || nerr != nil || n < 1 || k < 0 || k >= n {
		return Shard{}, fmt.Errorf("shard %q: want K/N with 0 ≤ K < N (the Kth of N disjoint parts, K from 0, as a Job's JOB_COMPLETION_INDEX)", s)
	}
	return Shard{k, n}, nil
}

// Owns says whether the scenario's input decodes to a schedule this shard
// executes: Keeps of the schedule's canonical encoding.
func (s Shard) Owns(sc Scenario, input []byte) bool {
	if s.N <= 1 {
		return true
	}
	return s.Keeps(sc.Encode(sc.Decode(input)))
}

// Keeps says whether the bytes hash into this shard. Owns applies it to a
// scenario's canonical input, which is what a campaign partitions.
func (s Shard) Keeps(input []byte) bool {
	if s.N <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write(input)
	return h.Sum64()%uint64(s.N) == uint64(s.K)
}

// shardFromEnv is STALEFUZZ_SHARD's shard.
func shardFromEnv() (Shard, error) { return ParseShard(os.Getenv("STALEFUZZ_SHARD")) }
