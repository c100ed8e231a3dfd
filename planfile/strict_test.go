package planfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/planfile"
)

// TestReadStrict: a saved plan whose JSON a lenient reader and jq would read two ways is refused with the JSON
// path of the key: a case-folded "Policy": null after the policy (encoding/json took the last, "no policy"), a
// second top-level "SAVED" object, a duplicate key, an unknown field.
func TestReadStrict(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{name: "Policy null after policy", old: "\n    \"targets\": [],", new: "\n    \"targets\": [],\n    \"policy\": {\"path\": \"org/policy.hcl\", \"sha256\": \"x\"},\n    \"Policy\": null,",
			want: `$.saved.Policy`},
		{name: "second SAVED object", old: "\n  \"saved\": {", new: "\n  \"SAVED\": {},\n  \"saved\": {", want: `$.SAVED`},
		{name: "duplicate key", old: "\n  \"saved\": {", new: "\n  \"saved\": null,\n  \"saved\": {", want: `$.saved (line`},
		{name: "unknown field", old: "\n  \"saved\": {", new: "\n  \"saved\": {\n    \"approved\": true,", want: `$.saved.approved`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"main.hcl": savedConfig, "prompts/fix.tmpl": "Fix it."})
			planPath := savePlan(t, dir)
			b := string(readPlain(t, planPath))
			if !strings.Contains(b, tc.old) {
				t.Fatalf("the plan has no %q:\n%s", tc.old, b)
			}
			os.WriteFile(planPath, []byte(strings.Replace(b, tc.old, tc.new, 1)), 0o600)
			_, err := planfile.ReadSaved(planPath)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not a kewplan plan file") {
				t.Errorf("ReadSaved() = %v, want a refusal naming %s", err, tc.want)
			}
		})
	}
}

// TestDigestIsOverTheDecodedBytes: the approvals digest is SHA-256 over the JSON that was decoded, so a change a
// reader would ignore (here, whitespace) is another digest, while compression, which reads the same bytes, is not.
func TestDigestIsOverTheDecodedBytes(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.hcl": savedConfig, "prompts/fix.tmpl": "Fix it."})
	planPath := savePlan(t, dir)
	digest := func(p string) string {
		f, err := planfile.ReadSaved(p)
		if err != nil {
			t.Fatal(err)
		}
		d, err := f.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	compressed := digest(planPath)
	plain := readPlain(t, planPath)
	os.WriteFile(planPath, plain, 0o600)
	if d := digest(planPath); d != compressed {
		t.Errorf("decompressed, the digest is %s, and compressed %s", d, compressed)
	}
	os.WriteFile(planPath, append(plain, ' '), 0o600)
	if d := digest(planPath); d == compressed {
		t.Errorf("a byte added left the digest %s", d)
	}
}

// TestEnforcePolicy: the policy apply is given must be the one the plan was made with, by SHA-256 of its bytes.
func TestEnforcePolicy(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.hcl": savedConfig, "prompts/fix.tmpl": "Fix it."})
	planPath := savePlan(t, dir) // made without a policy
	f, err := planfile.ReadSaved(planPath)
	if err != nil {
		t.Fatal(err)
	}
	err = f.EnforcePolicy(filepath.Join(dir, "org.hcl"), []byte("policy {}\n"))
	if !errors.Is(err, planfile.ErrPolicyMismatch) || !strings.Contains(err.Error(), "[policy-mismatch]: it records no policy") {
		t.Errorf("EnforcePolicy(no policy recorded) = %v", err)
	}
	if f.PolicyLocation() != "" {
		t.Errorf("a refused policy became the plan's: %s", f.PolicyLocation())
	}
}
