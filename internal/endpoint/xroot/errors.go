package xroot

import (
	"context"
	"errors"
	"fmt"

	"go-hep.org/x/hep/xrootd/xrdproto"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// XRootD server error codes (XProtocol.hh, "kXR_" prefix dropped). go-hep
// names only four of them; the protocol reference lists them all:
// https://xrootd.slac.stanford.edu/doc/dev56/XRdv520.htm#_Toc88513338
const (
	codeArgInvalid     = 3000
	codeArgMissing     = 3001
	codeArgTooLong     = 3002
	codeFileLocked     = 3003
	codeFileNotOpen    = 3004
	codeFSError        = 3005
	codeInvalidRequest = 3006
	codeIOError        = 3007
	codeNoMemory       = 3008
	codeNoSpace        = 3009
	codeNotAuthorized  = 3010
	codeNotFound       = 3011
	codeServerError    = 3012
	codeUnsupported    = 3013
	codeNoServer       = 3014
	codeNotFile        = 3015
	codeIsDirectory    = 3016
	codeCancelled      = 3017
	codeItExists       = 3018
	codeChkSumErr      = 3019
	codeInProgress     = 3020
	codeOverQuota      = 3021
	codeSigVerErr      = 3022
	codeDecryptErr     = 3023
	codeOverloaded     = 3024
	codeFSReadOnly     = 3025
	codeBadPayload     = 3026
	codeAttrNotFound   = 3027
	codeTLSRequired    = 3028
	codeNoReplicas     = 3029
	codeAuthFailed     = 3030
	codeImpossible     = 3031
	codeConflict       = 3032
	codeTooManyErrs    = 3033
	codeReqTimedOut    = 3034
	codeTimerExpired   = 3035
)

// classOf maps an error from the go-hep client to the endpoint error class
// it belongs to. The mapping:
//
//	kXR_NotFound                                  -> endpoint.ErrNotFound
//	kXR_ItExists                                  -> endpoint.ErrExist (a refusal)
//	kXR_Unsupported                               -> endpoint.ErrUnsupported (a refusal)
//	kXR_ArgInvalid, kXR_ArgMissing, kXR_ArgTooLong,
//	kXR_InvalidRequest, kXR_NotAuthorized, kXR_AuthFailed,
//	kXR_TLSRequired, kXR_NotFile, kXR_isDirectory, kXR_fsReadOnly,
//	kXR_NoSpace, kXR_overQuota, kXR_FileLocked, kXR_FileNotOpen,
//	kXR_ChkSumErr, kXR_SigVerErr, kXR_DecryptErr, kXR_BadPayload,
//	kXR_AttrNotFound, kXR_Impossible, kXR_Conflict -> endpoint.ErrRefused
//	kXR_FSError, kXR_IOError, kXR_NoMemory, kXR_ServerError,
//	kXR_noserver, kXR_noReplicas, kXR_Cancelled, kXR_inProgress,
//	kXR_Overloaded, kXR_TooManyErrs, kXR_ReqTimedOut,
//	kXR_TimerExpired, any other code               -> endpoint.ErrUnavailable
//	network errors, timeouts, a broken session     -> endpoint.ErrUnavailable
//
// kXR_noReplicas counts as unavailable, not as not found: a redirector says
// it when no data server answered, and a "not found" that is really an
// outage is the failure the federation must never report. kXR_IOError and
// kXR_FSError are the server's disk failing, so another replica is worth a
// try. broken reports whether the session itself is suspect (anything that
// is not a server's answer) and must be re-dialled.
func classOf(err error) (class error, broken bool) {
	var se xrdproto.ServerError
	if !errors.As(err, &se) {
		var pse *xrdproto.ServerError
		if !errors.As(err, &pse) || pse == nil {
			return endpoint.ErrUnavailable, true
		}
		se = *pse
	}
	switch se.Code {
	case codeNotFound:
		return endpoint.ErrNotFound, false
	case codeItExists:
		return endpoint.ErrExist, false
	case codeUnsupported:
		return endpoint.ErrUnsupported, false
	case codeArgInvalid, codeArgMissing, codeArgTooLong, codeInvalidRequest,
		codeNotAuthorized, codeAuthFailed, codeTLSRequired, codeNotFile,
		codeIsDirectory, codeFSReadOnly, codeNoSpace, codeOverQuota,
		codeFileLocked, codeFileNotOpen, codeChkSumErr, codeSigVerErr,
		codeDecryptErr, codeBadPayload, codeAttrNotFound, codeImpossible,
		codeConflict:
		return endpoint.ErrRefused, false
	}
	return endpoint.ErrUnavailable, false
}

// serverCode returns the kXR error code in err, or 0.
func serverCode(err error) int {
	var se xrdproto.ServerError
	if errors.As(err, &se) {
		return int(se.Code)
	}
	var pse *xrdproto.ServerError
	if errors.As(err, &pse) && pse != nil {
		return int(pse.Code)
	}
	return 0
}

// wrapErr builds the error a method returns: "xroot: op "path": cause",
// wrapping the endpoint class and the native error.
func wrapErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if isOurs(err) {
		return opErr(op, p, err)
	}
	class, _ := classOf(err)
	return opErr(op, p, fmt.Errorf("%w: %w", class, err))
}

// opErr is the error of op on path p: "xroot: op "p": err".
func opErr(op, p string, err error) error {
	return &endpoint.OpError{Kind: endpoint.KindXRoot, Op: op, Path: p, Err: err}
}

// isOurs reports whether err already carries an endpoint class (this
// package put it there).
func isOurs(err error) bool {
	return errors.Is(err, endpoint.ErrNotFound) || errors.Is(err, endpoint.ErrRefused) ||
		errors.Is(err, endpoint.ErrUnavailable)
}

// ctxErr is the error for a caller that stopped waiting.
func ctxErr(ctx context.Context) error {
	return fmt.Errorf("%w: %w", endpoint.ErrUnavailable, context.Cause(ctx))
}
