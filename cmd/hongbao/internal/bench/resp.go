package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// respConn is a minimal RESP2 client over one TCP connection: it writes a
// command and blocks until its reply has been read, so every call is exactly
// one round trip with nothing pipelined and no goroutine in between. That is
// how the classic design talks to Redis (one connection per worker, as with
// a connection-pooled client), and it keeps our client overhead as small as
// we can make it, so the baseline is not handicapped by the client.
type respConn struct {
	c   net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	buf []byte // command being built
}

// errNil is the reply of a nil bulk string (a Lua nil or false).
var errNil = errors.New("bench: nil reply")

// respError is an error reply from Redis.
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

// dialRESP connects to addr and authenticates and selects db when asked.
func dialRESP(addr, user, password string, db int) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, err
	}
	rc := &respConn{c: c, r: bufio.NewReaderSize(c, 16<<10), w: bufio.NewWriterSize(c, 16<<10)}
	if password != "" {
		args := []string{"AUTH", password}
		if user != "" {
			args = []string{"AUTH", user, password}
		}
		if _, err := rc.do(args...); err != nil {
			c.Close()
			return nil, fmt.Errorf("bench: auth: %w", err)
		}
	}
	if db != 0 {
		if _, err := rc.do("SELECT", strconv.Itoa(db)); err != nil {
			c.Close()
			return nil, fmt.Errorf("bench: select: %w", err)
		}
	}
	return rc, nil
}

func (rc *respConn) Close() error { return rc.c.Close() }

// do sends one command and reads its reply. A bulk or simple string comes
// back as its bytes (valid until the next call), an integer as its decimal
// text; a nil reply is errNil, an error reply a respError. Arrays are read
// and discarded (the bench never needs their contents on this path).
func (rc *respConn) do(args ...string) ([]byte, error) {
	b := rc.buf[:0]
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	rc.buf = b
	if _, err := rc.w.Write(b); err != nil {
		return nil, err
	}
	if err := rc.w.Flush(); err != nil {
		return nil, err
	}
	return rc.read()
}

// read reads one reply.
func (rc *respConn) read() ([]byte, error) {
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("bench: malformed reply %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', ':':
		return append([]byte(nil), body...), nil
	case '-':
		return nil, respError(body)
	case '$':
		n, err := respLength(body, "bulk")
		if err != nil {
			return nil, err
		}
		out := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, out); err != nil {
			return nil, err
		}
		return out[:n], nil
	case '*':
		n, err := respLength(body, "array")
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if _, err := rc.read(); err != nil && !errors.Is(err, errNil) {
				if _, ok := err.(respError); !ok {
					return nil, err
				}
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("bench: unexpected reply type %q", kind)
}

// respLength reads the length of a bulk string or an array (what); a
// negative one is the nil reply, errNil.
func respLength(body []byte, what string) (int, error) {
	n, err := strconv.Atoi(string(body))
	if err != nil {
		return 0, fmt.Errorf("bench: malformed %s length %q", what, body)
	}
	if n < 0 {
		return 0, errNil
	}
	return n, nil
}
