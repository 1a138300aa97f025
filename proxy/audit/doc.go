// Package audit classifies every write in a trace and flags the blind writes
// that replaced a change their writer had not seen.
//
// Package audit reads no environment variables.
package audit
