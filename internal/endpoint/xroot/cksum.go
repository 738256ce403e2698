package xroot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"go-hep.org/x/hep/xrootd/xrdproto"
)

// Why the checksum query does not go through go-hep: xrootd 5 answers
// kXR_query kXR_Qcksum with kXR_waitresp ("Job scheduled") and sends the
// checksum later in an unsolicited kXR_attn/kXR_asynresp message on stream
// 0. go-hep does not know either: it hands the kXR_waitresp body back as
// the answer, and the later kXR_attn goes to an unclaimed stream, which
// makes its reader goroutine panic. So the checksum is asked on a
// connection of its own, with a small hand-written exchange (handshake,
// kXR_login, kXR_query) that waits for the asynchronous answer, under one
// deadline, and is then closed.
//
// Protocol reference: XRootD protocol v5 (XProtocol.hh), sections
// "Initial handshake", kXR_login, kXR_query, kXR_waitresp, kXR_attn.

// XRootD request and response codes used here.
const (
	reqLogin = 3007
	reqQuery = 3001

	qCksum = 3 // kXR_Qcksum

	stOK       = 0
	stOKSoFar  = 4000
	stAttn     = 4001
	stAuthMore = 4002
	stError    = 4003
	stRedirect = 4004
	stWait     = 4005
	stWaitResp = 4006

	attnAsynResp = 5008 // kXR_asynresp

	maxFrame = 16 << 20 // no checksum answer is near this long
)

// queryChecksum asks addr for the checksum of the server path rp and
// returns the answer's text ("adler32 0a1b2c3d"). Connecting and logging
// in are bounded by short, the answer by long (the server may read the
// whole file), and everything by ctx. Server errors come back as
// xrdproto.ServerError.
func queryChecksum(ctx context.Context, addr, user, rp string, short, long time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, short+long)
	defer cancel()
	dl := net.Dialer{Timeout: short}
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(short))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if err := login(c, user); err != nil {
		return "", err
	}

	// kXR_query kXR_Qcksum: infotype, reserved, fhandle, reserved, path.
	q := make([]byte, 24+len(rp))
	binary.BigEndian.PutUint16(q[0:], 2)
	binary.BigEndian.PutUint16(q[2:], reqQuery)
	binary.BigEndian.PutUint16(q[4:], qCksum)
	binary.BigEndian.PutUint32(q[20:], uint32(len(rp)))
	copy(q[24:], rp)
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	for range 10 { // kXR_wait retries, each bounded by the deadline
		if _, err := c.Write(q); err != nil {
			return "", err
		}
		st, body, err := readAnswer(c, [2]byte{0, 2})
		if err != nil {
			return "", fmt.Errorf("query: %w", err)
		}
		if st == stWait {
			secs := 1
			if len(body) >= 4 {
				secs = int(binary.BigEndian.Uint32(body))
			}
			t := time.NewTimer(time.Duration(min(max(secs, 1), 30)) * time.Second)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			}
		}
		if st == stRedirect {
			return "", xrdproto.ServerError{Code: codeUnsupported, Message: "redirect on checksum query (redirectors are not followed here)"}
		}
		return string(body), nil
	}
	return "", errors.New("query: server kept asking to wait")
}

// errNeedsAuth is login's answer when the server asks for authentication
// (security information follows the session id): neither this file nor
// direct.go offers any.
var errNeedsAuth = xrdproto.ServerError{Code: codeNotAuthorized, Message: "server requires authentication"}

// login does the initial handshake and kXR_login (stream id 0,1) on a
// fresh connection c, under whatever deadline c has.
func login(c io.ReadWriter, user string) error {
	// Handshake: five 32-bit words, 0 0 0 4 2012.
	hs := make([]byte, 20)
	binary.BigEndian.PutUint32(hs[12:], 4)
	binary.BigEndian.PutUint32(hs[16:], 2012)
	if _, err := c.Write(hs); err != nil {
		return err
	}
	if _, _, _, err := readFrame(c); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}

	// kXR_login: pid, 8-byte user name, ability2, ability, capver, role.
	req := make([]byte, 24)
	binary.BigEndian.PutUint16(req[0:], 1)
	binary.BigEndian.PutUint16(req[2:], reqLogin)
	binary.BigEndian.PutUint32(req[4:], uint32(os.Getpid()))
	copy(req[8:16], user)
	req[18] = 5 // capver: protocol version 5, no async capability claimed
	if _, err := c.Write(req); err != nil {
		return err
	}
	st, body, err := readAnswer(c, [2]byte{0, 1})
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if st != stOK {
		return fmt.Errorf("login: unexpected status %d", st)
	}
	if len(body) > 16 {
		return errNeedsAuth
	}
	return nil
}

// readAnswer reads frames until the final answer for stream sid: it
// gathers kXR_oksofar parts, waits out kXR_waitresp for the kXR_attn
// kXR_asynresp that carries the real answer, and turns kXR_error into an
// xrdproto.ServerError. It returns kXR_ok, kXR_wait or kXR_redirect with
// the body.
func readAnswer(r io.Reader, sid [2]byte) (int, []byte, error) {
	var acc []byte
	for {
		fsid, st, body, err := readFrame(r)
		if err != nil {
			return 0, nil, err
		}
		if st == stAttn {
			// kXR_attn: actnum, reserved, then a whole response.
			if len(body) < 16 || binary.BigEndian.Uint32(body) != attnAsynResp {
				continue // some other notice; not ours
			}
			inner := body[8:]
			copy(fsid[:], inner[0:2])
			st = int(binary.BigEndian.Uint16(inner[2:]))
			n := int(binary.BigEndian.Uint32(inner[4:]))
			if n > len(inner)-8 {
				return 0, nil, errors.New("short kXR_asynresp")
			}
			body = inner[8 : 8+n]
		}
		if fsid != sid {
			continue
		}
		switch st {
		case stOKSoFar:
			acc = append(acc, body...)
		case stOK, stWait:
			return st, append(acc, body...), nil
		case stWaitResp:
			// The answer will come in a kXR_attn; keep reading.
		case stError:
			se := xrdproto.ServerError{Code: codeServerError, Message: "malformed error"}
			if len(body) >= 4 {
				se.Code = xrdproto.ServerErrorCode(binary.BigEndian.Uint32(body))
				msg := body[4:]
				if len(msg) > 0 && msg[len(msg)-1] == 0 {
					msg = msg[:len(msg)-1]
				}
				se.Message = string(msg)
			}
			return 0, nil, se
		case stRedirect:
			return st, body, nil
		case stAuthMore:
			return 0, nil, xrdproto.ServerError{Code: codeNotAuthorized, Message: "server requires authentication"}
		default:
			return 0, nil, fmt.Errorf("unexpected response status %d", st)
		}
	}
}

// readFrame reads one response: stream id, status, body.
func readFrame(r io.Reader) ([2]byte, int, []byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return [2]byte{}, 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[4:])
	if n > maxFrame {
		return [2]byte{}, 0, nil, fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return [2]byte{}, 0, nil, err
	}
	return [2]byte{h[0], h[1]}, int(binary.BigEndian.Uint16(h[2:])), body, nil
}
