package webhooks

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfigs(t *testing.T) {
	t.Parallel()
	const plain = "a-plain-secret-of-32-characters!"
	env := map[string]string{"HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "SHORT": "short"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" for valid
	}{
		{"plain secret", Config{Name: "a", URL: "https://example.com/h", Secret: plain}, ""},
		{"whsec secret", Config{Name: "a", URL: "http://127.0.0.1:9/h", Secret: env["HOOK_SECRET"]}, ""},
		{"secret_env", Config{Name: "a", URL: "https://example.com/h", SecretEnv: "HOOK_SECRET"}, ""},
		{"bad name", Config{Name: "A b", URL: "https://example.com", Secret: plain}, "webhooks[0].name"},
		{"no scheme", Config{Name: "a", URL: "example.com/h", Secret: plain}, "absolute http or https URL"},
		{"ftp", Config{Name: "a", URL: "ftp://example.com/h", Secret: plain}, "absolute http or https URL"},
		{"credentials", Config{Name: "a", URL: "https://u:p@example.com/h", Secret: plain}, "credentials"},
		{"no secret", Config{Name: "a", URL: "https://example.com"}, "exactly one of secret and secret_env"},
		{"both secrets", Config{Name: "a", URL: "https://example.com", Secret: plain, SecretEnv: "HOOK_SECRET"}, "exactly one"},
		{"short secret", Config{Name: "a", URL: "https://example.com", Secret: "short"}, "at least 32 characters"},
		{"short whsec", Config{Name: "a", URL: "https://example.com", Secret: "whsec_c2hvcnQ="}, "24 to 64 bytes"},
		{"bad whsec", Config{Name: "a", URL: "https://example.com", Secret: "whsec_!!!"}, "base64"},
		{"unset env", Config{Name: "a", URL: "https://example.com", SecretEnv: "NOPE"}, "NOPE is empty or unset"},
		{"short env", Config{Name: "a", URL: "https://example.com", SecretEnv: "SHORT"}, "secret_env SHORT"},
		{"event", Config{Name: "a", URL: "https://example.com", Secret: plain, Events: []string{"structured_output.done"}}, "unknown event"},
		{"timeout", Config{Name: "a", URL: "https://example.com", Secret: plain, Timeout: "10ms"}, "timeout"},
		{"retry_for", Config{Name: "a", URL: "https://example.com", Secret: plain, RetryFor: "forever"}, "retry_for"},
	} {
		eps, err := parse([]Config{tc.cfg}, getenv, true)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			continue
		}
		if err == nil && (len(eps[0].key) < minKeyBytes || len(eps[0].events) != 3 ||
			eps[0].timeout != DefaultTimeout || eps[0].retryFor != DefaultRetryFor) {
			t.Errorf("%s: defaults %+v", tc.name, eps[0])
		}
	}
	if _, err := parse([]Config{{Name: "a", URL: "https://x", Secret: plain}, {Name: "a", URL: "https://y", Secret: plain}}, getenv, true); err == nil ||
		!strings.Contains(err.Error(), "defined twice") {
		t.Errorf("duplicate names: %v", err)
	}
	// Check (the config file's) does not read the environment.
	if err := Check([]Config{{Name: "a", URL: "https://x", SecretEnv: "NOPE"}}); err != nil {
		t.Errorf("Check with secret_env: %v", err)
	}
	eps, err := parse([]Config{{Name: "a", URL: "https://x", Secret: plain, Events: []string{EventFailed, EventFailed},
		Timeout: "2s", RetryFor: "1h"}}, getenv, true)
	if err != nil || len(eps[0].events) != 1 || eps[0].timeout != 2*time.Second || eps[0].retryFor != time.Hour {
		t.Errorf("explicit values: %+v %v", eps, err)
	}
}

// The Standard Webhooks specification's test vector.
func TestSignStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	key, err := decodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}

func TestTruncateKeepsCharacters(t *testing.T) {
	t.Parallel()
	if got := truncate("aé", 2); got != "a" {
		t.Errorf("truncate cut a character: %q", got)
	}
}
