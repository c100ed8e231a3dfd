package egress

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// A brokered request names its node twice: by the placeholder it presents and by the node's proxy identity, a
// path segment of its base URL derived from the node's proxy secret (BrokerIdentity). A placeholder that leaked
// to another node's container is refused there, because that container's base URL carries its own identity, and
// a base URL edited to name the placeholder's node needs that node's identity too.

// Reasons of a refused identity.
const (
	ReasonNoIdentity         = "unknown proxy identity"
	ReasonOtherNodesIdentity = "another node's proxy identity"
)

// identityLabel separates the identity's HMAC from any other use of the proxy secret.
const identityLabel = "kewplan broker identity\x00"

// BrokerIdentity is the node's proxy identity in its broker base URL: the first 16 bytes of
// HMAC-SHA256(key: the node's proxy secret, message: "kewplan broker identity\x00" + node), as 32 lower-case hex
// digits. It tells nothing of the secret, and only who holds the secret (apply, the proxy) can make it.
func BrokerIdentity(node, proxySecret string) string {
	m := hmac.New(sha256.New, []byte(proxySecret))
	m.Write([]byte(identityLabel + node))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// identityOf checks the identity segment of a request to bn: "" when it is bn's; ReasonOtherNodesIdentity when
// it is another node's; ReasonNoIdentity otherwise. Every node's identity is compared, in constant time, so that
// the answer's timing tells nothing of whose it was.
func (s *Server) identityOf(bn *brokerNode, presented string) string {
	own, other := false, false
	for _, n := range s.broker.nodes {
		if subtle.ConstantTimeCompare([]byte(presented), []byte(n.identity)) == 1 {
			if n == bn {
				own = true
			} else {
				other = true
			}
		}
	}
	switch {
	case own:
		return ""
	case other:
		return ReasonOtherNodesIdentity
	}
	return ReasonNoIdentity
}
