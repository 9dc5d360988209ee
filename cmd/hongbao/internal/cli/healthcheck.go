package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// healthcheckCmd is "hongbao healthcheck URL": exit 0 when URL answers
// 2xx within --timeout, else 1 with a line saying why. The image is FROM
// scratch, with no curl or wget for a container's health check to run:
// compose runs this instead (serve's /readyz, settle's /healthz).
type healthcheckCmd struct {
	base
	url     string
	timeout time.Duration
}

const healthcheckUsage = `Usage: hongbao healthcheck [--timeout D] URL

Sends GET URL and exits 0 when it answers 2xx within --timeout, else 1
with one line saying why (the status and the error the answer carries, or
the connection's failure); 2 for bad arguments. For container health
checks in images without curl: serve's /readyz and /healthz, settle's
/healthz on its --metrics-listen address. No proxy is used.

Flags:`

func newHealthcheckCmd(env *IO) command { return &healthcheckCmd{base: base{env: env}} }

func (c *healthcheckCmd) parseFlags(args []string) error {
	fs := newFlagSet("healthcheck", c.env)
	fs.DurationVar(&c.timeout, "timeout", 2*time.Second, "how long the whole request may take")
	setUsage(fs, c.env, healthcheckUsage)
	operands, err := parseOperands(fs, c.env, args)
	if err != nil {
		return err
	}
	if len(operands) != 1 {
		return usageErrorf("give one URL, as http://127.0.0.1:8080/readyz")
	}
	u, err := url.Parse(operands[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("%q is not an http:// or https:// URL with a host", operands[0])
	}
	if c.timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	c.url = u.String()
	return nil
}

func (c *healthcheckCmd) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	// No proxy from the environment: the URL is the container's own.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", c.timeout)
		}
		return &exitError{code: 1, err: err}
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return &exitError{code: 1, err: fmt.Errorf("%s answered %s%s", c.url, res.Status, why(body))}
	}
	fmt.Fprintf(c.env.Stdout, "%s answered %s\n", c.url, res.Status)
	return nil
}

// why is ": " and the message of an answer in hongbao's error shape, or
// its first line, shortened; "" for an empty body.
func why(body []byte) string {
	var e struct {
		Error struct{ Code, Message string }
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		msg = e.Error.Code + ": " + e.Error.Message
	} else {
		msg, _, _ = strings.Cut(strings.TrimSpace(string(body)), "\n")
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		return ""
	}
	return ": " + msg
}
