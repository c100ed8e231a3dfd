package main

// The fake agent's network modes, for the egress tests:
//
//	mode=egress targets=host:port,host:port   CONNECT to each target through HTTPS_PROXY and report, in a system
//	                                          event "egress", each target's status code (0 when no answer) and,
//	                                          for a 200, the first line the far end sent; also whether resolving
//	                                          resolve=<name> worked
//	--stub ADDR                               a TCP server on ADDR that greets every connection with "kewplan-stub"
//	--dns-stub ADDR                           a UDP DNS server on ADDR answering every A query with 192.0.2.77 and
//	                                          printing each name asked on stdout
//	--resolve NAME                            resolve NAME, print "resolved <addrs>" or "failed <error>", exit 0

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func egressMode(o options, session string) {
	proxy := os.Getenv("HTTPS_PROXY")
	results := map[string]any{}
	for _, target := range strings.Split(o.get("targets", ""), ",") {
		if target == "" {
			continue
		}
		code, greeting := connect(proxy, target)
		results[target] = map[string]any{"status": code, "greeting": greeting}
	}
	out := map[string]any{"type": "system", "subtype": "egress", "session_id": session, "proxy_set": proxy != "",
		"no_proxy": os.Getenv("NO_PROXY"), "results": results}
	if name := o.get("resolve", ""); name != "" {
		out["resolve"] = resolve(name)
	}
	emit(out)
}

// connect asks the proxy for a tunnel to target and returns the status code and, once tunnelled, the first line.
func connect(proxy, target string) (int, string) {
	u, err := url.Parse(proxy)
	if err != nil || u.Host == "" {
		return 0, "no proxy"
	}
	c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		return 0, err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	auth := ""
	if u.User != nil {
		pw, _ := u.User.Password()
		auth = "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)) + "\r\n"
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth)
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return 0, err.Error()
	}
	var code int
	fmt.Sscanf(status, "HTTP/1.%d %d", new(int), &code)
	for { // headers
		l, err := r.ReadString('\n')
		if err != nil || l == "\r\n" || l == "\n" {
			break
		}
	}
	if code != 200 {
		return code, ""
	}
	greeting, _ := r.ReadString('\n')
	return code, strings.TrimSpace(greeting)
}

func resolve(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := (&net.Resolver{PreferGo: true}).LookupHost(ctx, name)
	if err != nil {
		return "failed " + err.Error()
	}
	return "resolved " + strings.Join(addrs, ",")
}

// networkCommand runs the --stub, --dns-stub and --resolve commands; false when args name none.
func networkCommand(args []string) bool {
	if len(args) < 3 {
		return false
	}
	switch args[1] {
	case "--model-stub":
		if len(args) < 5 {
			fmt.Fprintln(os.Stderr, "usage: --model-stub ADDR CERT_B64 KEY_B64 [INPUT_TOKENS]")
			os.Exit(2)
		}
		input := "120"
		if len(args) > 5 {
			input = args[5]
		}
		modelStub(args[2], args[3], args[4], input)
		return true
	case "--stub":
		l, err := net.Listen("tcp", args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "stub:", err)
			os.Exit(1)
		}
		fmt.Println("listening", l.Addr())
		for {
			c, err := l.Accept()
			if err != nil {
				continue
			}
			go func() { fmt.Fprintln(c, "kewplan-stub"); time.Sleep(time.Second); c.Close() }()
		}
	case "--dns-stub":
		pc, err := net.ListenPacket("udp", args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "dns stub:", err)
			os.Exit(1)
		}
		fmt.Println("listening", pc.LocalAddr())
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				continue
			}
			if reply := dnsAnswer(buf[:n]); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	case "--resolve":
		fmt.Println(resolve(args[2]))
		os.Exit(0)
	}
	return false
}

// dnsAnswer answers an A query with 192.0.2.77 and prints the name asked.
func dnsAnswer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) == 0 {
		return nil
	}
	fmt.Println("query", qs[0].Name.String(), qs[0].Type.String())
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true})
	b.EnableCompression()
	_ = b.StartQuestions()
	_ = b.Question(qs[0])
	_ = b.StartAnswers()
	if qs[0].Type == dnsmessage.TypeA {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: [4]byte{192, 0, 2, 77}})
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
