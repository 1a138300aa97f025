package proxy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// servingCert makes the listeners' certificate: a P-256 key for 127.0.0.1
// and localhost, signed by a CA of the proxy's own, both made anew for
// each proxy and valid for a year. It returns the certificate and the PEM
// of the leaf and its CA, which clients trust it by. The layout is
// certutil.GenerateSelfSignedCertKey's, with ECDSA instead of RSA-2048:
// every watch is a connection of its own, and the RSA signature of each
// handshake was a tenth of the proxy's CPU under load (make bench).
func servingCert() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "stalefuzz-proxy-ca"}, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour).UTC(),
		NotAfter:     now.Add(365 * 24 * time.Hour).UTC(),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("unable to sign the serving certificate: %w", err)
	}
	var chain bytes.Buffer
	for _, c := range [][]byte{der, ca.Raw} {
		if err := pem.Encode(&chain, &pem.Block{Type: certutil.CertificateBlockType, Bytes: c}); err != nil {
			return tls.Certificate{}, nil, err
		}
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key, Leaf: leaf}, chain.Bytes(), nil
}
