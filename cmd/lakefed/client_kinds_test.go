package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestClientRootAndS3 runs the client commands against a real XRootD
// server (root://) and a real S3 server (s3://), the way xrdcp/xrdfs and
// the AWS CLI users would.
func TestClientRootAndS3(t *testing.T) {
	xrd := testenv.StartXRootDChecksum(t)
	s3 := testenv.StartS3(t)
	t.Setenv("AWS_ENDPOINT_URL", s3.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	t.Setenv("AWS_DEFAULT_REGION", s3.Region)

	for _, tc := range []struct{ name, base string }{
		{"root", strings.TrimSuffix(xrd.RootURL, "/") + "//"},
		{"s3", "s3://" + s3.Bucket + "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			want := randomFile(t, dir, "src", 3<<20+17, 7)
			src := filepath.Join(dir, "src")
			mustRun(t, "cp", src, tc.base+"up/f.bin")
			if r := mustRun(t, "ls", "-l", tc.base+"up/"); !strings.Contains(r.stdout, "f.bin") || !strings.Contains(r.stdout, "3145745") {
				t.Errorf("ls -l %sup/ = %q, want f.bin with size 3145745", tc.base, r.stdout)
			}
			st := fields(mustRun(t, "stat", tc.base+"up/f.bin").stdout)
			if st["size"] != "3145745" || st["adler32"] == "" {
				t.Errorf("stat %sup/f.bin = %v, want size 3145745 and an adler32", tc.base, st)
			}
			back := filepath.Join(dir, "back")
			mustRun(t, "cp", tc.base+"up/f.bin", back)
			sameFile(t, back, want)
			mustRun(t, "rm", tc.base+"up/f.bin")
			if r := lakefed(t, "stat", tc.base+"up/f.bin"); r.code != exitNotFound {
				t.Errorf("stat after rm: exit %d (%s), want %d", r.code, r.stderr, exitNotFound)
			}
			_ = os.Remove(back)

			// lakefed bench works against the kind too.
			r := mustRun(t, "bench", "io", "--no-store", "--json", "--size", "2MiB", tc.base)
			if !strings.Contains(r.stdout, `"verified": true`) && !strings.Contains(r.stdout, `"verified":true`) {
				t.Errorf("bench io %s: want a verified round trip, got %s", tc.base, r.stdout)
			}
			r = mustRun(t, "bench", "open", "--no-store", "--speed", "50", "--jobs", "4", "--ramp-step", "0",
				"--hold", "10s", "--files", "10", tc.base)
			if !strings.Contains(r.stdout, "0 failed") {
				t.Errorf("bench open %s: want no failed opens, got %s", tc.base, r.stdout)
			}
		})
	}
}
