package k8snode

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"time"
)

// GitHost is the name the node's DNS gives the host end of the veth, where the test git server listens.
const GitHost = "git.kewplan.test"

// GitServer serves git's smart HTTP protocol (git http-backend) over the bare repositories under root, on
// https://GitHost/<name>.git, with pushes allowed where a repository sets http.receivepack. Requests for any other
// host name go to other (nil: 421).
func GitServer(root string, other http.Handler) (http.Handler, error) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		switch {
		case host == GitHost:
			backend.ServeHTTP(w, r)
		case other != nil:
			other.ServeHTTP(w, r)
		default:
			http.Error(w, "no such host here", http.StatusMisdirectedRequest)
		}
	}), nil
}

// ServeTLS serves h on addr with the certificate certPEM/keyPEM until the server is closed.
func ServeTLS(addr string, certPEM, keyPEM []byte, h http.Handler) (*http.Server, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return srv, nil
}
