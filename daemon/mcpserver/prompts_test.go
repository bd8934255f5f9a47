package mcpserver

import (
	"slices"
	"testing"
)

func TestIdentName(t *testing.T) {
	tests := []struct {
		in     string
		pascal string
		snake  string
		err    bool
	}{
		{"Settings", "Settings", "settings", false},
		{"user profile", "UserProfile", "user_profile", false},
		{"user_profile", "UserProfile", "user_profile", false},
		{"user-profile", "UserProfile", "user_profile", false},
		{"userProfile", "UserProfile", "user_profile", false},
		{"UserProfilePage", "UserProfilePage", "user_profile_page", false},
		{"HTTPClient", "HttpClient", "http_client", false},
		{"OAuth2Login", "OAuth2Login", "o_auth2_login", false},
		{"  spaced  out ", "SpacedOut", "spaced_out", false},
		{"", "", "", true},
		{"___", "", "", true},
		{"2fa", "", "", true},
		{"user/profile", "", "", true},
		{"café", "", "", true},
	}
	for _, tt := range tests {
		words, err := identName(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("identName(%q) = %q, want an error", tt.in, words)
			}
			continue
		}
		if err != nil {
			t.Errorf("identName(%q) error = %v", tt.in, err)
			continue
		}
		if p, s := pascal(words), snake(words); p != tt.pascal || s != tt.snake {
			t.Errorf("identName(%q) = %s, %s, want %s, %s", tt.in, p, s, tt.pascal, tt.snake)
		}
	}
}

func TestParseEndpoints(t *testing.T) {
	got, err := parseEndpoints("GET /users, post /users ,DELETE /users/{id},")
	want := []endpoint{{"GET", "/users"}, {"POST", "/users"}, {"DELETE", "/users/{id}"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseEndpoints = %v, %v, want %v", got, err, want)
	}
	for _, bad := range []string{"/users", "FETCH /users", "GET users", "GET /a b"} {
		if got, err := parseEndpoints(bad); err == nil {
			t.Errorf("parseEndpoints(%q) = %v, want an error", bad, got)
		}
	}
}
