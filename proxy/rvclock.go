package proxy

import (
	"sort"
	"strconv"
	"sync"
	"time"
)

// rvClock remembers when the proxy first saw each newer resourceVersion, so
// that Rewind can name the newest resourceVersion as of a past moment. etcd's
// resourceVersions are one global revision, so any of them is a valid
// point to list at, whatever resource it came from.
type rvClock struct {
	mu    sync.Mutex
	times []time.Time
	rvs   []uint64
}

// maxClock bounds how many points the clock keeps (the oldest are forgotten);
// a Rewind reaches back seconds, not hours.
const maxClock = 1 << 16

// observe records that rv existed at t. Non-numeric or older values are
// ignored.
func (c *rvClock) observe(t time.Time, rv string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := len(c.rvs); k > 0 && (n <= c.rvs[k-1] || t.Before(c.times[k-1])) {
		return
	}
	if len(c.rvs) == maxClock {
		c.times, c.rvs = append(c.times[:0], c.times[maxClock/2:]...), append(c.rvs[:0], c.rvs[maxClock/2:]...)
	}
	c.times, c.rvs = append(c.times, t), append(c.rvs, n)
}

// at returns the newest resourceVersion seen at or before t, "" if none.
func (c *rvClock) at(t time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.times), func(i int) bool { return c.times[i].After(t) })
	if i == 0 {
		return ""
	}
	return strconv.FormatUint(c.rvs[i-1], 10)
}

// latest returns the newest resourceVersion seen, "" if none.
func (c *rvClock) latest() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rvs) == 0 {
		return ""
	}
	return strconv.FormatUint(c.rvs[len(c.rvs)-1], 10)
}

// latestN returns the newest resourceVersion seen, 0 if none.
func (c *rvClock) latestN() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rvs) == 0 {
		return 0
	}
	return c.rvs[len(c.rvs)-1]
}
