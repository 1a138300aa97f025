package fuzz

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
)

// Shard is one of N disjoint parts of a campaign's search (STALEFUZZ_SHARD
// "K/N", 0 ≤ K < N): while fuzzing, the campaign starts only from the seeds
// (the scenario's, the no-fault ones and those derived from reference runs)
// whose input hashes to K modulo N, so that N shards share them out, each
// seed in exactly one shard. The mutations each shard makes from there
// follow go test's own random stream, which Go does not let a caller seed
// or partition: shards overlap there only by chance. Corpus entries and
// findings of N shards merge by copying their files into one
// testdata/fuzz/FuzzXxx directory (Go's corpus format).
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

// Keeps says whether the seed input is in this shard.
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
