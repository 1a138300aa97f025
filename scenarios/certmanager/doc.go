// Package certmanager runs cert-manager's controller (v1.21.2) from a
// target file alone (target.yaml): a SelfSigned Issuer, a CA Certificate it
// signs, a CA Issuer on that Certificate's Secret and a leaf Certificate the
// CA Issuer signs, with knobs for cert-manager's feature gates, a dnsNames
// edit during the first issuance, a renewal as `cmctl renew` asks for it
// (the status condition Issuing=True) and a deleted Secret.
//
// cert-manager's own main (cmd/controller) is a Go module that the Go module
// proxy does not serve; ./controller is a main in a module of its own that
// links the published module's controllers the way cmd/controller/app does.
// The tests build it when it is not cached (target.Prepare), as `stalefuzz
// prepare scenarios/certmanager/target.yaml` does: minutes, once.
//
// TestCertManager runs the knobs without faults. TestCertManagerTwoKeys is
// finding 1's regression row: the key manager makes a second next private
// key Secret for one Certificate when its status write naming the first
// meets a 409 and the first Secret's event is late. TestCertManagerReissue
// is finding 2's: with the Secrets watch 100 ms late, the trigger
// controller reads the Secret just written from a cache that lacks it and
// issues the Certificate again, round after round. The rate and truth-table
// tests run only with STALEFUZZ_RATE=N, TestFalseAlarms with
// STALEFUZZ_FALSE_ALARMS=N. See README.md.
package certmanager
