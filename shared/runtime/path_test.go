package runtime

import "testing"

func TestConfigSourcePath(t *testing.T) {
	for _, tc := range []struct{ filename, path, want string }{
		{"/etc/paddock/paddock.hcl", "data/ws", "/etc/paddock/data/ws"},
		{"/etc/paddock/paddock.hcl", "./ws", "/etc/paddock/ws"},
		{"/etc/paddock/paddock.hcl", "../secrets/host", "/etc/secrets/host"},
		{"/etc/paddock/paddock.hcl", "/var/lib/ws", "/var/lib/ws"},
		{"/etc/paddock/paddock.hcl", "", ""},
		{"<dev>", "data/ws", "data/ws"},
		{"test.hcl", "ws", "ws"},
	} {
		if got := (ConfigSource{Filename: tc.filename}).Path(tc.path); got != tc.want {
			t.Errorf("Path(%q) in %q = %q, want %q", tc.path, tc.filename, got, tc.want)
		}
	}
}
