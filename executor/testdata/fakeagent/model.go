package main

// The brokered-credentials stand-ins:
//
//	--model-stub ADDR CERT_B64 KEY_B64 [INPUT_TOKENS]
//	                                     an HTTPS server speaking a sliver of Anthropic's Messages API: POST
//	                                     /v1/messages answers JSON, or server-sent events with "stream":true, each
//	                                     with usage of INPUT_TOKENS input tokens (120) and 25 output tokens; it
//	                                     prints one line per request with the sha256 of the x-api-key it received
//	mode=model                           the agent calls $ANTHROPIC_BASE_URL/v1/messages with $ANTHROPIC_API_KEY
//	                                     (through HTTP_PROXY, as SDKs do), once plain and once streamed, and reports
//	                                     the answers and the sha256 of every value of its environment and of
//	                                     /proc/1/environ (so a test can tell a real key never reached it)
//	mode=modelcalls calls=N              the agent makes N plain calls to $ANTHROPIC_BASE_URL/v1/messages and prints
//	                                     no usage of its own: a system event per call with its status and, for a
//	                                     refusal, the error message the SDK would show; then=apierror then ends
//	                                     as mode=apierror does (an overloaded API, exit 1); gate_after=K waits
//	                                     after call K until /work/.kew-gate exists (a system event "gate" says
//	                                     it waits); retry=1 tries a call again, up to 1,200 times 50 ms apart,
//	                                     while it fails to connect or answers 5xx, as an SDK retries (the
//	                                     event's "tries" counts them); verdict=V then writes a verdict
//	mode=hangup                          the agent makes a streamed call and hangs up after message_start (the stub
//	                                     is slow), a streamed call the stub cuts before its usage, and calls the
//	                                     batches and files paths: a system event "broker_call" for each; then it
//	                                     works on for sleep=D (0s)

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func modelStub(addr, certB64, keyB64, input string) {
	certPEM, _ := base64.StdEncoding.DecodeString(certB64)
	keyPEM, _ := base64.StdEncoding.DecodeString(keyB64)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		fmt.Fprintln(os.Stderr, "model stub:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/messages", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		fmt.Printf("request key_sha256=%s placeholder=%v authorization=%q\n", sha(key), strings.HasPrefix(key, "kewplan-placeholder-"), r.Header.Get("Authorization"))
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fl, _ := w.(http.Flusher)
			// A body naming "stub":"slow" waits 1 s after message_start (the agent can hang up meanwhile); one
			// naming "stub":"cut" ends the stream there, without its usage.
			slow, cut := strings.Contains(string(body), `"stub":"slow"`), strings.Contains(string(body), `"stub":"cut"`)
			for i, ev := range []string{
				`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_stub","model":"claude-sonnet-4-5","usage":{"input_tokens":` + input + `,"output_tokens":1}}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"streamed"}}`,
				`event: message_delta` + "\n" + `data: {"type":"message_delta","usage":{"output_tokens":25}}`,
				`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
			} {
				fmt.Fprint(w, ev+"\n\n")
				if fl != nil {
					fl.Flush()
				}
				if i == 0 && cut {
					panic(http.ErrAbortHandler)
				}
				if i == 0 && slow {
					time.Sleep(time.Second)
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_stub","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello from the stub"}],"usage":{"input_tokens":`+input+`,"output_tokens":25}}`)
	})
	srv := &http.Server{Addr: addr, Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println("listening", addr)
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(os.Stderr, "model stub:", err)
		os.Exit(1)
	}
}

// modelMode calls the model API at the base URL the container was given.
func modelMode(session, model string) {
	base, key := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY")
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	call := func(stream bool) map[string]any {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":16,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
		req, err := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(body))
		if err != nil {
			return map[string]any{"error": err.Error()}
		}
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return map[string]any{"error": err.Error()}
		}
		defer resp.Body.Close()
		var events []string
		text := ""
		if stream {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
					events = append(events, e)
				}
			}
		} else {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			text = string(b)
		}
		return map[string]any{"status": resp.StatusCode, "body": text, "events": events}
	}
	var envHashes []string
	for _, kv := range os.Environ() {
		if _, v, ok := strings.Cut(kv, "="); ok && v != "" {
			envHashes = append(envHashes, sha(v))
		}
	}
	if b, err := os.ReadFile("/proc/1/environ"); err == nil {
		for _, kv := range strings.Split(string(b), "\x00") {
			if _, v, ok := strings.Cut(kv, "="); ok && v != "" {
				envHashes = append(envHashes, sha(v))
			}
		}
	}
	report := map[string]any{"type": "system", "subtype": "model", "session_id": session, "base_url_set": base != "",
		"key_is_placeholder": strings.HasPrefix(key, "kewplan-placeholder-"), "env_sha256": envHashes,
		"plain": call(false), "streamed": call(true)}
	emit(report)
}

// modelCallsMode makes calls=N model calls and prints no usage: what a lying agent's stream looks like to the
// agent's meter, while the proxy sees every answer.
func modelCallsMode(opts options, session, model string) {
	base, key := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY")
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	n, _ := strconv.Atoi(opts.get("calls", "3"))
	for i := 1; i <= n; i++ {
		tools := ""
		if typ := opts.get("tool", ""); typ != "" {
			tools = fmt.Sprintf(`,"tools":[{"type":%q,"name":"web_search"}]`, typ)
		}
		body := fmt.Sprintf(`{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":"hi"}]%s}`, model, tools)
		ev := map[string]any{"type": "system", "subtype": "model_call", "session_id": session, "n": i}
		retry := opts.get("retry", "") == "1"
		for try := 1; ; try++ {
			req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(body))
			req.Header.Set("x-api-key", key)
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("content-type", "application/json")
			delete(ev, "error")
			ev["tries"] = try
			resp, err := client.Do(req)
			if err != nil {
				ev["error"] = err.Error()
			} else {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				ev["status"] = resp.StatusCode
				var e struct {
					Error struct{ Type, Message string } `json:"error"`
				}
				if resp.StatusCode != 200 && json.Unmarshal(b, &e) == nil {
					ev["error_type"], ev["message"] = e.Error.Type, e.Error.Message
				}
			}
			if !retry || try >= 1200 || err == nil && resp.StatusCode < 500 {
				break
			}
			time.Sleep(50 * time.Millisecond) // the SDK's own backoff
		}
		emit(ev)
		if strconv.Itoa(i) == opts.get("gate_after", "") {
			emit(map[string]any{"type": "system", "subtype": "gate", "session_id": session, "n": i})
			for {
				if _, err := os.Stat("/work/.kew-gate"); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond) // the agent's own wait for its input, like any process polling
			}
		}
	}
}

// hangupMode is an agent that tries to go unmetered: it hangs up before the usage event, lets a stream end without
// it, and calls the paths that bill outside the Messages answers.
func hangupMode(opts options, session, model string) {
	base, key := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY")
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	call := func(name, method, path, body string, hangUp bool) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		ev := map[string]any{"type": "system", "subtype": "broker_call", "session_id": session, "name": name}
		resp, err := client.Do(req)
		if err != nil {
			ev["error"] = err.Error()
			emit(ev)
			return
		}
		ev["status"] = resp.StatusCode
		if hangUp {
			r := bufio.NewReader(resp.Body)
			line, _ := r.ReadString('\n')
			ev["first_line"] = strings.TrimSpace(line)
		} else {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			var e struct {
				Error struct{ Type, Message string } `json:"error"`
			}
			if resp.StatusCode != 200 && json.Unmarshal(b, &e) == nil {
				ev["error_type"], ev["message"] = e.Error.Type, e.Error.Message
			}
		}
		resp.Body.Close()
		emit(ev)
	}
	msg := func(stub string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":1000,"stream":true,"stub":%q,"messages":[{"role":"user","content":"hi"}]}`, model, stub)
	}
	call("hangup", "POST", "/v1/messages", msg("slow"), true)
	call("cut", "POST", "/v1/messages", msg("cut"), false)
	call("batches", "POST", "/v1/messages/batches", `{"requests":[]}`, false)
	call("files", "GET", "/v1/files", "", false)
	// An agent that goes on working: the node has not ended while the provider finishes the answer it hung up on.
	if d, err := time.ParseDuration(opts.get("sleep", "0s")); err == nil {
		time.Sleep(d)
	}
}
