package arch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// envRef is a test's read of an opt-in variable: os.Getenv("LAKEFED_…"),
// directly or through a constant.
var envRef = regexp.MustCompile(`"(LAKEFED_[A-Z0-9_]+)"`)

// childVars are variables the tests set for a child process of their own
// (a re-executed test binary, a server they start): not for users.
var childVars = []string{"LAKEFED_STORAGE_CRASH_ROOT", "LAKEFED_STORAGE_TEST_CHILD", "LAKEFED_BENCH_DB"}

// TestREADMENamesTestVariables: every LAKEFED_ variable a test or the
// test helpers read is named in docs/testing.md's table of variables, so
// an opt-in test (the 6 GiB uploads, strict interop) can be found.
func TestREADMENamesTestVariables(t *testing.T) {
	page, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tests, ok := strings.Cut(string(page), "\n## Variables the tests read\n")
	if !ok {
		t.Fatal("docs/testing.md has no section \"Variables the tests read\"")
	}
	tests, _, _ = strings.Cut(tests, "\n## ")
	vars := map[string]string{} // variable → a file that reads it
	err = filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != "../.." {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") && !strings.Contains(filepath.ToSlash(p), "internal/testenv/") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range envRef.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(childVars, m[1]) {
				vars[m[1]] = p
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(vars) == 0 {
		t.Fatal("found no LAKEFED_ variable in the tests; the walk is broken")
	}
	for v, file := range vars {
		if !strings.Contains(tests, "`"+v) {
			t.Errorf("docs/testing.md's table of variables does not name %s (read by %s)", v, file)
		}
	}
}
