package proxy

// ExpiredWatch is expiredWatch, for the byte-compatibility test.
var ExpiredWatch = expiredWatch
