package xrootd

import (
	"encoding/binary"
	"hash/crc32"

	"go-hep.org/x/hep/xrootd/xrdproto"
)

// The request IDs, response statuses and error codes of XProtocol.hh
// (XRootD protocol v5) that go-hep's xrdproto does not export. The rest
// come from xrdproto and its subpackages.
const (
	reqAuth    = 3000 // kXR_auth
	reqReadV   = 3025 // kXR_readv
	reqPgWrite = 3026 // kXR_pgwrite
	reqPgRead  = 3030 // kXR_pgread
	reqFirst   = 3000 // kXR_1stRequest: kXR_status carries requestid - this

	statusStatus = 4007 // kXR_status: pgread/pgwrite answers

	protocolVersion = 0x520 // kXR_PROTOCOLVERSION 5.2.0

	// kXR_protocol response flags.
	flagIsManager = 0x00000002 // kXR_isManager
	flagSupPgRW   = 0x00200000 // kXR_suppgrw: pgread and pgwrite
	flagHaveTLS   = 0x80000000 // kXR_haveTLS: the server can do TLS
	flagGotoTLS   = 0x40000000 // kXR_gotoTLS: TLS starts right after this answer
	flagTLSLogin  = 0x04000000 // kXR_tlsLogin: TLS is required before kXR_login

	// kXR_protocol request flags (ClientProtocolRequest::flags) and the
	// mask of its expect byte.
	protoAbleTLS = 0x02 // kXR_ableTLS: the client can do TLS
	protoWantTLS = 0x04 // kXR_wantTLS: the client wants TLS now (roots://)

	// kXR_status resptype.
	finalResult   = 0x00 // kXR_FinalResult
	partialResult = 0x01 // kXR_PartialResult

	pageSize = 4096 // kXR_pgPageSZ

	// readv limits (XrdProto::maxRvecsz, maxRVdsz, minRVbsz): the
	// client never asks for more, so more is a broken or hostile client.
	maxReadVItems = 1024
	maxReadVItem  = 2097136
	readVBuf      = 2097152

	statVFS = 1 // kXR_stat option kXR_vfs

	// kXR_dirlist options.
	dirlistDStat = 2 // kXR_dstat
	dirlistDCksm = 4 // kXR_dcksm (implies dstat)
)

// Error codes (XErrorCode).
const (
	codeArgInvalid    xrdproto.ServerErrorCode = 3000
	codeArgMissing    xrdproto.ServerErrorCode = 3001
	codeArgTooLong    xrdproto.ServerErrorCode = 3002
	codeFileNotOpen   xrdproto.ServerErrorCode = 3004
	codeInvalidReq                             = xrdproto.InvalidRequest
	codeIOError                                = xrdproto.IOError
	codeNotAuthorized                          = xrdproto.NotAuthorized
	codeNotFound                               = xrdproto.NotFound
	codeServerError   xrdproto.ServerErrorCode = 3012
	codeUnsupported   xrdproto.ServerErrorCode = 3013
	codeIsDirectory   xrdproto.ServerErrorCode = 3016
	codeItExists      xrdproto.ServerErrorCode = 3018
	codeChkSumErr     xrdproto.ServerErrorCode = 3019
	codeTLSRequired   xrdproto.ServerErrorCode = 3028
)

// Stat flags (XStatRespFlags).
const (
	statXSet     = 1
	statIsDir    = 2
	statOther    = 4
	statReadable = 16
	statWritable = 32
)

// castagnoli is CRC32C (RFC 3720 / 7143), the checksum of pgread and
// pgwrite pages and of the kXR_status body.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the fixed 24-byte head of every request: stream id, request
// id, 16 bytes of parameters, and the length of the data that follows.
type header [24]byte

func (h *header) sid() [2]byte    { return [2]byte{h[0], h[1]} }
func (h *header) id() uint16      { return binary.BigEndian.Uint16(h[2:]) }
func (h *header) params() []byte  { return h[4:20] }
func (h *header) dlen() int64     { return int64(int32(binary.BigEndian.Uint32(h[20:]))) }
func (h *header) fhandle() uint32 { return binary.BigEndian.Uint32(h[4:]) }

// u16, u32 and u64 read big-endian numbers at off in b.
func u16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
func u32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
func u64(b []byte, off int) uint64 { return binary.BigEndian.Uint64(b[off:]) }

// respHeader is the 8-byte head of a response.
func respHeader(sid [2]byte, status uint16, n int) []byte {
	h := make([]byte, 8)
	putRespHeader(h, sid, status, n)
	return h
}

// putRespHeader writes the head of a response into h[:8].
func putRespHeader(h []byte, sid [2]byte, status uint16, n int) {
	h[0], h[1] = sid[0], sid[1]
	binary.BigEndian.PutUint16(h[2:], status)
	binary.BigEndian.PutUint32(h[4:], uint32(n))
}

// errorBody is a kXR_error body: code, message, NUL.
func errorBody(code xrdproto.ServerErrorCode, msg string) []byte {
	b := make([]byte, 4, 4+len(msg)+1)
	binary.BigEndian.PutUint32(b, uint32(code))
	b = append(b, msg...)
	return append(b, 0)
}

// statusHead is the head of a kXR_status answer to request reqID: the
// response header, the 16-byte status body with its CRC32C, and info
// (pgread's and pgwrite's 8-byte offset); dlen bytes of data follow it.
// Unlike other answers, the response header's length covers only the
// status body and info, not the data (XrdXrootdResponse::srsComplete).
func statusHead(sid [2]byte, reqID uint16, final bool, info []byte, dlen int) []byte {
	return putStatusHead(make([]byte, 8+16+len(info)), sid, reqID, final, info, dlen)
}

// putStatusHead writes statusHead into b, which has room for it, and
// returns the part of b it fills.
func putStatusHead(b []byte, sid [2]byte, reqID uint16, final bool, info []byte, dlen int) []byte {
	b = b[:8+16+len(info)]
	clear(b)
	b[0], b[1] = sid[0], sid[1]
	binary.BigEndian.PutUint16(b[2:], statusStatus)
	binary.BigEndian.PutUint32(b[4:], uint32(16+len(info)))
	body := b[8:]
	body[4], body[5] = sid[0], sid[1]
	body[6] = byte(reqID - reqFirst)
	if final {
		body[7] = finalResult
	} else {
		body[7] = partialResult
	}
	binary.BigEndian.PutUint32(body[12:], uint32(dlen))
	copy(body[16:], info)
	binary.BigEndian.PutUint32(body, crc32.Checksum(body[4:], castagnoli))
	return b
}
