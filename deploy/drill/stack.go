package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// stack runs docker and docker compose on one compose project.
type stack struct {
	file, envFile, project string
	// master is the Redis master set the sentinels watch.
	masterSet string
	sentinels []string
}

// compose runs docker compose on the project and returns its output.
func (s *stack) compose(ctx context.Context, args ...string) (string, error) {
	full := []string{"compose", "-p", s.project, "-f", s.file}
	if s.envFile != "" {
		full = append(full, "--env-file", s.envFile)
	}
	return run(ctx, "docker", append(full, args...)...)
}

// run runs a command and returns its standard output; an error carries
// its standard error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(errb.String()+out.String(), 8)))
	}
	return out.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// container is the id of a service's container (running or not).
func (s *stack) container(ctx context.Context, service string) (string, error) {
	out, err := s.compose(ctx, "ps", "-a", "-q", service)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		return "", fmt.Errorf("service %s: want one container, compose ps gives %q", service, id)
	}
	return id, nil
}

// docker runs a docker command on a service's container: docker VERB
// [ARGS...] CONTAINER.
func (s *stack) docker(ctx context.Context, service string, verb ...string) error {
	id, err := s.container(ctx, service)
	if err != nil {
		return err
	}
	_, err = run(ctx, "docker", append(verb, id)...)
	return err
}

// redisCLI runs redis-cli in a Redis service's container with the
// password of its secret (read inside the container, on no command line)
// and returns the raw reply.
func (s *stack) redisCLI(ctx context.Context, service string, args ...string) (string, error) {
	id, err := s.container(ctx, service)
	if err != nil {
		return "", err
	}
	full := append([]string{"exec", id, "sh", "-c", `REDISCLI_AUTH="$(cat /run/secrets/redis_password)" exec redis-cli --raw "$@"`, "sh"}, args...)
	out, err := run(ctx, "docker", full...)
	return strings.TrimSpace(out), err
}

// master asks the sentinels which Redis service is the master now (the
// first that answers).
func (s *stack) master(ctx context.Context) (string, error) {
	var errs []error
	for _, sn := range s.sentinels {
		id, err := s.container(ctx, sn)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out, err := run(ctx, "docker", "exec", id, "redis-cli", "-p", "26379", "--raw", "sentinel", "get-master-addr-by-name", s.masterSet)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if host, _, ok := strings.Cut(strings.TrimSpace(out), "\n"); ok && host != "" {
			return host, nil
		}
		errs = append(errs, fmt.Errorf("%s names no master: %q", sn, out))
	}
	return "", fmt.Errorf("no sentinel names the master: %w", errors.Join(errs...))
}

// ip is a service's address on the project's network.
func (s *stack) ip(ctx context.Context, service string) (string, error) {
	id, err := s.container(ctx, service)
	if err != nil {
		return "", err
	}
	out, err := run(ctx, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", id)
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return "", fmt.Errorf("service %s has no address", service)
	}
	return f[0], nil
}

// health is a service container's health status ("healthy", "starting",
// "unhealthy", or its state when it has no health check).
func (s *stack) health(ctx context.Context, service string) string {
	id, err := s.container(ctx, service)
	if err != nil {
		return "missing"
	}
	out, err := run(ctx, "docker", "inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}", id)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(out)
}

// waitHealthy waits until a service is healthy (or running, without a
// health check).
func (s *stack) waitHealthy(ctx context.Context, service string, within time.Duration) error {
	last := ""
	err := waitFor(ctx, within, 250*time.Millisecond, func() bool {
		last = s.health(ctx, service)
		return last == "healthy" || last == "running"
	})
	if err != nil {
		return fmt.Errorf("%s not healthy within %s (last %s)", service, within, last)
	}
	return nil
}

// waitFor polls cond every step until it holds, ctx ends or within passes.
func waitFor(ctx context.Context, within, step time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(step):
		}
	}
}
