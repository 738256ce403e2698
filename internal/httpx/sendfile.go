package httpx

import (
	"io"
	"os"
)

// SendFileRange copies rg of f to w, from f's own offset (it seeks f; a
// caller that shares f between goroutines must not). The LimitedReader
// over the *os.File is what net/http's response hands, through
// net.TCPConn.ReadFrom, to sendfile(2): the bytes go from the page cache
// to the socket without entering the process. Other writers get a plain
// copy. A file that ends before rg does gives io.ErrUnexpectedEOF, and
// the caller aborts its answer.
func SendFileRange(w io.Writer, f *os.File, rg Range) error {
	if _, err := f.Seek(rg.Start, io.SeekStart); err != nil {
		return err
	}
	n, err := io.Copy(w, &io.LimitedReader{R: f, N: rg.Length})
	if err == nil && n != rg.Length {
		err = io.ErrUnexpectedEOF
	}
	return err
}
