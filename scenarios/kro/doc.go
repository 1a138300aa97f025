// Package kro runs KRO's controller (kubernetes-sigs/kro, cmd/controller at
// v0.9.4) from its target file against a real apiserver, and checks what
// a restart in the middle of applying or deleting an instance leaves
// behind. See README.md.
package kro
