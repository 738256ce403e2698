package buffer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestJournalFullIsTold: the journal's disk full is told apart from
// other failures (an upload is then 507, as a full spool is).
func TestJournalFullIsTold(t *testing.T) {
	ctx := context.Background()
	dir := testenv.Tmpfs(t, "size=2m")
	j, err := openJournal(ctx, filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.db.Close()
	testenv.FillFS(t, dir, 0)
	var ierr error
	for i := 0; i < 100000 && ierr == nil; i++ {
		_, ierr = j.insert(ctx, &entry{path: fmt.Sprintf("/f/%d/%s", i, strings.Repeat("n", 200)), spool: fmt.Sprintf("s%d", i),
			mtime: time.Now(), state: statePending, done: map[string]bool{}, targets: []string{"t"}})
	}
	if ierr == nil || !journalFull(ierr) {
		t.Fatalf("insert on a full disk = %v; want an error journalFull knows", ierr)
	}
	if journalFull(errors.New("disk I/O error")) {
		t.Error("journalFull of another error = true")
	}
}
