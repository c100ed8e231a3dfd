package egress

// The proxy runs in an image FROM scratch, which has no certificate store: without roots of its own, every
// brokered request to a public model API would fail its TLS verification. x509roots/fallback (the Go team's
// bundle of the Mozilla roots) is used only when the system has none, so a proxy run on a host still trusts that
// host's store.
import _ "golang.org/x/crypto/x509roots/fallback"
