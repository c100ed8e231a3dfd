package approval

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/kewplan/kewplan/internal/safefile"
)

// The namespaces kewplan signs in: a signature made for one purpose (a git commit, a file, a receipt) never
// passes as another.
const (
	PlanNamespace    = "kewplan-plan"
	ReceiptNamespace = "kewplan-receipt"
)

// maxKeyBytes bounds a key file.
const maxKeyBytes = 64 << 10

// LoadSigner reads the signing key named by path: an OpenSSH private key without a passphrase, or a public key
// (such as ~/.ssh/id_ed25519.pub) whose private half ssh-agent holds, reached through SSH_AUTH_SOCK in environ.
// kewplan never asks for a passphrase: a protected key is used through the agent (ssh-add).
func LoadSigner(path string, environ []string) (ssh.Signer, error) {
	b, err := safefile.Read(path, maxKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if pub, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil && !bytes.Contains(b, []byte("PRIVATE KEY")) {
		return agentSigner(path, pub, environ)
	}
	signer, err := ssh.ParsePrivateKey(b)
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("signing key %s is protected by a passphrase, which kewplan does not ask for: add it to ssh-agent (ssh-add %s) and give --key %s.pub", path, path, path)
	case err != nil:
		return nil, fmt.Errorf("signing key %s is not an OpenSSH private or public key: %v", path, err)
	}
	return signer, nil
}

// agentSigner is the agent's signer for pub.
func agentSigner(path string, pub ssh.PublicKey, environ []string) (ssh.Signer, error) {
	sock := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "SSH_AUTH_SOCK="); ok {
			sock = v
		}
	}
	if sock == "" {
		return nil, fmt.Errorf("signing key %s is a public key, and no ssh-agent is running (SSH_AUTH_SOCK is not set): give the private key, or start ssh-agent and ssh-add it", path)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ssh-agent at SSH_AUTH_SOCK: %w", err)
	}
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh-agent: %w", err)
	}
	for _, s := range signers {
		if bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
			return s, nil // the connection lives as long as the process: one signature is made
		}
	}
	conn.Close()
	return nil, fmt.Errorf("ssh-agent does not hold the key of %s (%s): ssh-add its private key", path, ssh.FingerprintSHA256(pub))
}

// Sign signs msg in namespace and returns the armored signature, as `ssh-keygen -Y sign -n NAMESPACE` writes it
// (SHA-512 message hash, rsa-sha2-512 for RSA keys).
func Sign(signer ssh.Signer, namespace string, msg []byte) ([]byte, error) {
	sig, err := sshsig.Sign(bytes.NewReader(msg), signer, sshsig.HashSHA512, namespace)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return sshsig.Armor(sig), nil
}

// parseSignature reads an armored signature and refuses what SSHSIG forbids: an RSA signature over SHA-1.
func parseSignature(armored []byte) (*sshsig.Signature, error) {
	sig, err := sshsig.Unarmor(armored)
	if err != nil {
		return nil, fmt.Errorf("not an SSH signature (%v)", err)
	}
	if sig.Signature.Format == ssh.KeyAlgoRSA {
		return nil, errors.New("an RSA signature over SHA-1 (ssh-rsa), which SSH signatures do not allow")
	}
	if _, ok := sig.PublicKey.(*ssh.Certificate); ok {
		return nil, errors.New("signed with a certificate: kewplan checks each approver's own key")
	}
	return sig, nil
}

// verifySignature checks sig over msg in namespace, by the key it carries; who that key belongs to is the
// allowed signers' question.
func verifySignature(sig *sshsig.Signature, namespace string, msg []byte) error {
	return sshsig.Verify(bytes.NewReader(msg), sig, sig.PublicKey, sig.HashAlgorithm, namespace)
}

// Fingerprint is a key's SHA256 fingerprint as ssh-keygen -l prints it.
func Fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }
