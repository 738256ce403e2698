// Package xrdwire is the few XRootD protocol messages lakefed speaks
// itself, on plain connections, where go-hep's client cannot be used: the
// initial handshake, kXR_login, and reading answers (kXR_oksofar parts,
// kXR_waitresp followed by a kXR_attn kXR_asynresp, kXR_error). The xroot
// kind's checksum query and direct reads use it, and so does bench's
// xrdopen, which must stop at a redirector's answer.
//
//	c, err := xrdwire.Dial(ctx, "host:1094", "lakefed", 10*time.Second)
//	if err != nil { return err } // xrdproto.ServerError from the server, ErrNeedsAuth, or the network's
//	_, _ = c.Write(request) // stream id 0,2 and on: Login used 0,1
//	st, body, err := xrdwire.ReadAnswer(c, [2]byte{0, 2})
//
// Protocol reference: XRootD protocol v5 (XProtocol.hh), sections
// "Initial handshake", kXR_login, kXR_waitresp, kXR_attn.
package xrdwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"time"

	"go-hep.org/x/hep/xrootd/xrdproto"
)

// Request IDs (kXR_*) of the requests lakefed writes itself.
const (
	ReqQuery   = 3001
	ReqClose   = 3003
	ReqDirlist = 3004
	ReqLogin   = 3007
	ReqOpen    = 3010
	ReqRead    = 3013
	ReqStat    = 3017
)

// Response statuses.
const (
	StatusOK       = 0
	StatusOKSoFar  = 4000
	StatusAttn     = 4001
	StatusAuthMore = 4002
	StatusError    = 4003
	StatusRedirect = 4004
	StatusWait     = 4005
	StatusWaitResp = 4006

	attnAsynResp = 5008 // kXR_asynresp

	// serverError is kXR_ServerError, for an error answer without a code.
	serverError = 3012
)

// MaxFrame bounds the body of one response: no answer lakefed asks for
// is near it, and a read asks for less.
const MaxFrame = 16 << 20

// ErrTooLong is ReadAnswerLimit's answer when the parts of an answer
// add up to more than the caller's bound; the rest of the answer is not
// read, so the connection is in the middle of it.
var ErrTooLong = errors.New("answer longer than the bound asked for")

// kXRDataServer is the server type a data server gives in its answer
// to the handshake.
const kXRDataServer = 1

// ErrNeedsAuth is Login's answer when the server asks for authentication
// (security information follows the session id): none is offered.
var ErrNeedsAuth = xrdproto.ServerError{Code: xrdproto.NotAuthorized, Message: "server requires authentication"}

// Dial connects to addr and logs in as user, both within d and ctx. The
// deadline the login ran under stays on the connection, for the caller
// to move. A ctx that ends during the login ends it too (ctx.Err()).
func Dial(ctx context.Context, addr, user string, d time.Duration) (net.Conn, error) {
	c, _, err := DialServer(ctx, addr, user, d)
	return c, err
}

// DialServer is Dial, and also says whether the server's answer to the
// handshake called it a data server (kXR_DataServer) rather than a load
// balancer (kXR_LBalServer: a redirector, or a lakefed door), whose
// answers may come from any of the servers behind it.
func DialServer(ctx context.Context, addr, user string, d time.Duration) (c net.Conn, dataServer bool, err error) {
	dl := net.Dialer{Timeout: d}
	c, err = dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	_ = c.SetDeadline(time.Now().Add(d))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	dataServer, err = Login(c, user)
	if !stop() {
		c.Close()
		return nil, false, ctx.Err()
	}
	if err != nil {
		c.Close()
		return nil, false, err
	}
	return c, dataServer, nil
}

// Login does the initial handshake and kXR_login (stream id 0,1) on a
// fresh connection c, under whatever deadline c has, and says whether
// the server is a data server (DialServer). It reads exactly its own
// answers from c, so a buffered reader made afterwards misses nothing.
func Login(c io.ReadWriter, user string) (dataServer bool, err error) {
	// Handshake: five 32-bit words, 0 0 0 4 2012. The answer is the
	// protocol version and the server type (XProtocol.hh: kXR_DataServer
	// 1, kXR_LBalServer 0).
	hs := make([]byte, 20)
	binary.BigEndian.PutUint32(hs[12:], 4)
	binary.BigEndian.PutUint32(hs[16:], 2012)
	if _, err := c.Write(hs); err != nil {
		return false, err
	}
	_, _, hsBody, err := ReadFrame(c)
	if err != nil {
		return false, fmt.Errorf("handshake: %w", err)
	}
	dataServer = len(hsBody) >= 8 && binary.BigEndian.Uint32(hsBody[4:]) == kXRDataServer

	// kXR_login: pid, 8-byte user name, ability2, ability, capver, role.
	req := make([]byte, 24)
	binary.BigEndian.PutUint16(req[0:], 1)
	binary.BigEndian.PutUint16(req[2:], ReqLogin)
	binary.BigEndian.PutUint32(req[4:], uint32(os.Getpid()))
	copy(req[8:16], user)
	req[18] = 5 // capver: protocol version 5, no async capability claimed
	if _, err := c.Write(req); err != nil {
		return false, err
	}
	st, body, err := ReadAnswer(c, [2]byte{0, 1})
	if err != nil {
		return false, fmt.Errorf("login: %w", err)
	}
	if st != StatusOK {
		return false, fmt.Errorf("login: unexpected status %d", st)
	}
	if len(body) > 16 {
		return false, ErrNeedsAuth
	}
	return dataServer, nil
}

// ReadAnswer reads frames until the final answer for stream sid: it
// gathers kXR_oksofar parts, waits out kXR_waitresp for the kXR_attn
// kXR_asynresp that carries the real answer, and turns kXR_error into an
// xrdproto.ServerError. It returns kXR_ok, kXR_wait or kXR_redirect with
// the body.
func ReadAnswer(r io.Reader, sid [2]byte) (int, []byte, error) {
	return ReadAnswerLimit(r, sid, math.MaxInt)
}

// ReadAnswerLimit is ReadAnswer for answers whose kXR_oksofar parts a
// server could make as long as it likes (kXR_dirlist): when the body
// would grow past max bytes it stops, before reading the frame that
// would, with ErrTooLong.
func ReadAnswerLimit(r io.Reader, sid [2]byte, max int) (int, []byte, error) {
	var acc []byte
	for {
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, nil, err
		}
		fsid, st := [2]byte{h[0], h[1]}, int(binary.BigEndian.Uint16(h[2:]))
		n := int64(binary.BigEndian.Uint32(h[4:]))
		if n > MaxFrame {
			return 0, nil, fmt.Errorf("response of %d bytes", n)
		}
		// A kXR_attn wraps its response in 16 bytes more.
		if room := max - len(acc); room < MaxFrame && n > int64(room)+16 {
			return 0, nil, ErrTooLong
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, nil, err
		}
		if st == StatusAttn {
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
		if (st == StatusOKSoFar || st == StatusOK) && len(body) > max-len(acc) {
			return 0, nil, ErrTooLong
		}
		switch st {
		case StatusOKSoFar:
			acc = append(acc, body...)
		case StatusOK, StatusWait:
			return st, append(acc, body...), nil
		case StatusWaitResp:
			// The answer will come in a kXR_attn; keep reading.
		case StatusError:
			return 0, nil, ParseError(body)
		case StatusRedirect:
			return st, body, nil
		case StatusAuthMore:
			return 0, nil, ErrNeedsAuth
		default:
			return 0, nil, fmt.Errorf("unexpected response status %d", st)
		}
	}
}

// ParseError turns the body of a kXR_error answer (code, message, NUL)
// into an xrdproto.ServerError.
func ParseError(body []byte) xrdproto.ServerError {
	se := xrdproto.ServerError{Code: serverError, Message: "malformed error"}
	if len(body) >= 4 {
		se.Code = xrdproto.ServerErrorCode(binary.BigEndian.Uint32(body))
		msg := body[4:]
		if len(msg) > 0 && msg[len(msg)-1] == 0 {
			msg = msg[:len(msg)-1]
		}
		se.Message = string(msg)
	}
	return se
}

// ReadFrame reads one response: stream id, status, body.
func ReadFrame(r io.Reader) ([2]byte, int, []byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return [2]byte{}, 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[4:])
	if n > MaxFrame {
		return [2]byte{}, 0, nil, fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return [2]byte{}, 0, nil, err
	}
	return [2]byte{h[0], h[1]}, int(binary.BigEndian.Uint16(h[2:])), body, nil
}
