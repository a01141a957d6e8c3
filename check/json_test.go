package check

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestJSONSurvivesNagios: --json holds no "|" (Nagios would cut the output there) and no
// ";" (it would turn it into ":"), and decodes to the very reasons and line.
func TestJSONSurvivesNagios(t *testing.T) {
	r := Result{State: Critical, Key: "k", Reasons: []string{"a | b; c"}}
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(b, "|;\n") {
		t.Fatalf("JSON %s holds | ; or a newline", b)
	}
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil || len(j.Reasons) != 1 || j.Reasons[0] != "a | b; c" || j.Line != r.Line() || j.ExitCode != 2 {
		t.Fatalf("decoded %+v (%v); want the reason, the line and exit 2 back", j, err)
	}
}
