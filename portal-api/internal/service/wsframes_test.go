package service

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// frame is a client's WebSocket frame (RFC 6455: masked) of opcode op.
func frame(op byte, payload []byte) []byte {
	mask := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	out := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	out = append(out, mask[:]...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	return out
}

func TestWSFrames(t *testing.T) {
	big := append([]byte("0"), bytes.Repeat([]byte("x"), 70000)...)
	for name, tc := range map[string]struct {
		stream []byte
		want   int
	}{
		"input":                {frame(2, []byte("0ls\r")), 1},
		"text input":           {frame(1, []byte("0a")), 1},
		"the first message":    {frame(2, []byte(`{"AuthToken":""}`)), 0},
		"resize":               {frame(2, []byte(`1{"columns":80}`)), 0},
		"pause, resume":        {append(frame(2, []byte("2")), frame(2, []byte("3"))...), 0},
		"pong":                 {frame(10, []byte("0")), 0},
		"ping":                 {frame(9, []byte("0")), 0},
		"close":                {frame(8, []byte("0")), 0},
		"continuation":         {frame(0, []byte("0")), 0},
		"empty":                {frame(2, nil), 0},
		"16-bit length":        {append(frame(2, bytes.Repeat([]byte("0"), 300)), frame(2, []byte("0"))...), 2},
		"64-bit length":        {append(frame(2, big), frame(2, []byte("1"))...), 1},
		"input after a resize": {append(append(frame(2, []byte("1{}")), frame(10, nil)...), frame(2, []byte("0q"))...), 1},
		"not masked":           {[]byte{0x82, 0x02, '0', 'a'}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			var whole wsFrames
			if got := whole.feed(tc.stream); got != tc.want {
				t.Errorf("whole: %d inputs, want %d", got, tc.want)
			}
			var bytewise wsFrames
			got := 0
			for i := range tc.stream {
				got += bytewise.feed(tc.stream[i : i+1])
			}
			if got != tc.want {
				t.Errorf("byte by byte: %d inputs, want %d", got, tc.want)
			}
		})
	}
}

// FuzzWSFrames: any stream, split anywhere, counts as it does whole, and
// never more inputs than frames could hold.
func FuzzWSFrames(f *testing.F) {
	f.Add(frame(2, []byte("0ls")), 1)
	f.Add(append(frame(2, []byte("1{}")), frame(9, nil)...), 3)
	f.Add(frame(2, bytes.Repeat([]byte("0"), 200)), 100)
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, 5)
	f.Fuzz(func(t *testing.T, stream []byte, cut int) {
		var whole wsFrames
		want := whole.feed(stream)
		if want > len(stream)/7 {
			t.Fatalf("%d inputs in %d bytes: a frame takes at least 7", want, len(stream))
		}
		if cut < 0 || cut > len(stream) {
			cut = len(stream) / 2
		}
		var split wsFrames
		if got := split.feed(stream[:cut]) + split.feed(stream[cut:]); got != want {
			t.Fatalf("split at %d: %d inputs, whole %d", cut, got, want)
		}
	})
}

// TestCookieSpellings: a cookie the server signed is taken only as it was
// written: not with a line break, padding or the other alphabet in
// either part.
func TestCookieSpellings(t *testing.T) {
	s := &Server{cfg: Config{Now: func() time.Time { return time.Unix(1795983872, 0) }}}
	s.sessions.key = bytes.Repeat([]byte{7}, 32)
	good := s.cookieValue("abc", cookieClaims{user: "mem", exp: time.Unix(1795983872+3600, 0), token: 7, made: time.Unix(1795983872, 0)})
	if _, ok := s.checkCookie(good, "abc"); !ok {
		t.Fatal("its own cookie refused")
	}
	p64, m64, _ := strings.Cut(good, ".")
	for name, v := range map[string]string{
		"LF in the signature":   p64 + "." + m64[:5] + "\n" + m64[5:],
		"CR LF in the payload":  p64[:4] + "\r\n" + p64[4:] + "." + m64,
		"LF at the end":         good + "\n",
		"padding":               p64 + "." + m64 + "=",
		"standard alphabet":     strings.NewReplacer("-", "+", "_", "/").Replace(good),
		"last character's bits": p64 + "." + m64[:len(m64)-1] + string(m64[len(m64)-1]^1),
	} {
		if v == good {
			continue // the replacement found nothing to replace
		}
		if cc, ok := s.checkCookie(v, "abc"); ok {
			t.Errorf("%s: %q taken as %+v", name, v, cc)
		}
	}
}

// FuzzSessionCookie: no value but one the server signed for the session
// is taken, and the one it signed is.
func FuzzSessionCookie(f *testing.F) {
	s := &Server{cfg: Config{Now: func() time.Time { return time.Unix(1795983872, 0) }}}
	s.sessions.key = bytes.Repeat([]byte{7}, 32)
	good := s.cookieValue("abc", cookieClaims{user: "mem", exp: time.Unix(1795983872+3600, 0), token: 7, made: time.Unix(1795983872, 0)})
	f.Add(good, "abc")
	f.Add("bWVt.eA", "abc")
	f.Add(good[:len(good)-1], "abc")
	// The find: a line break inside the signature, which encoding/base64
	// skips.
	f.Add(good[:len(good)-5]+"\n"+good[len(good)-5:], "abc")
	f.Fuzz(func(t *testing.T, v, id string) {
		cc, ok := s.checkCookie(v, id)
		if ok && (v != good || id != "abc" || cc.user != "mem" || cc.token != 7) {
			t.Fatalf("took %q for session %q as %+v", v, id, cc)
		}
	})
	if cc, ok := s.checkCookie(good, "abc"); !ok || cc.user != "mem" {
		f.Fatalf("its own cookie refused")
	}
}
