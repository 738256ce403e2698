package xroot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"go-hep.org/x/hep/xrootd/xrdproto"
)

// Why the checksum query does not go through go-hep: xrootd 5 answers
// kXR_query kXR_Qcksum with kXR_waitresp ("Job scheduled") and sends the
// checksum later in an unsolicited kXR_attn/kXR_asynresp message on stream
// 0. go-hep does not know either: it hands the kXR_waitresp body back as
// the answer, and the later kXR_attn goes to an unclaimed stream, which
// makes its reader goroutine panic. So the checksum is asked on a
// connection of its own, with a small hand-written exchange (handshake and
// kXR_login from package xrdwire, then kXR_query) that waits for the
// asynchronous answer, under one deadline, and is then closed.
//
// Protocol reference: XRootD protocol v5 (XProtocol.hh), sections
// "Initial handshake", kXR_login, kXR_query, kXR_waitresp, kXR_attn.

// qCksum is kXR_query's infotype kXR_Qcksum.
const qCksum = 3

// queryChecksum asks addr for the checksum of the server path rp and
// returns the answer's text ("adler32 0a1b2c3d"). Connecting and logging
// in are bounded by short, the answer by long (the server may read the
// whole file), and everything by ctx. Server errors come back as
// xrdproto.ServerError.
func queryChecksum(ctx context.Context, addr, user, rp string, short, long time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, short+long)
	defer cancel()
	c, err := xrdwire.Dial(ctx, addr, user, short)
	if err != nil {
		return "", err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	// kXR_query kXR_Qcksum: infotype, reserved, fhandle, reserved, path.
	q := make([]byte, 24+len(rp))
	binary.BigEndian.PutUint16(q[0:], 2)
	binary.BigEndian.PutUint16(q[2:], xrdwire.ReqQuery)
	binary.BigEndian.PutUint16(q[4:], qCksum)
	binary.BigEndian.PutUint32(q[20:], uint32(len(rp)))
	copy(q[24:], rp)
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	for range 10 { // kXR_wait retries, each bounded by the deadline
		if _, err := c.Write(q); err != nil {
			return "", err
		}
		st, body, err := xrdwire.ReadAnswer(c, [2]byte{0, 2})
		if err != nil {
			return "", fmt.Errorf("query: %w", err)
		}
		if st == xrdwire.StatusWait {
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
		if st == xrdwire.StatusRedirect {
			return "", xrdproto.ServerError{Code: codeUnsupported, Message: "redirect on checksum query (redirectors are not followed here)"}
		}
		return string(body), nil
	}
	return "", errors.New("query: server kept asking to wait")
}
