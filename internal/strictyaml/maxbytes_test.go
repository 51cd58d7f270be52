package strictyaml

import "testing"

// A file above MaxBytes is one problem at its start, with the hint the
// options give, and is not parsed (a syntax error past the bound is not
// reported); Load reads no more than the bound.
func TestMaxBytes(t *testing.T) {
	type conf struct {
		Name string `yaml:"name"`
	}
	opts := Options{What: "a test file", MaxBytes: 16, MaxBytesHint: "raise it"}
	var c conf
	r := Decode("big.yaml", []byte("name: 0123456789abcdef\n: {"), &c, opts)
	if err := r.Err(); err == nil || err.Error() != "big.yaml:1:1: the test file is larger than 16 bytes, the most it may be (hint: raise it)" {
		t.Errorf("Decode above MaxBytes: %v", err)
	}
	if err := Decode("ok.yaml", []byte("name: x\n"), &c, opts).Err(); err != nil || c.Name != "x" {
		t.Errorf("Decode within MaxBytes: %v, %+v", err, c)
	}
	data, err := ReadLimited("/dev/zero", 1<<10)
	if err != nil || len(data) != 1<<10+1 {
		t.Errorf("ReadLimited(/dev/zero, 1 KiB) = %d bytes, %v; want the bound and one more", len(data), err)
	}
	for n, want := range map[int64]string{16 << 20: "16 MiB", 1 << 30: "1 GiB", 1414: "1414 bytes", 3 << 10: "3 KiB", 0: "0 bytes"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
