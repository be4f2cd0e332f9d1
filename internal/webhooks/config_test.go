package webhooks

import (
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/config"
)

func TestParseConfigs(t *testing.T) {
	t.Parallel()
	const plain = "a-plain-secret-of-32-characters!"
	env := map[string]string{"HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "SHORT": "short"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name string
		cfg  config.Webhook
		err  string // "" for valid
	}{
		{"plain secret", config.Webhook{Name: "a", URL: "https://example.com/h", Secret: plain}, ""},
		{"whsec secret", config.Webhook{Name: "a", URL: "http://127.0.0.1:9/h", Secret: env["HOOK_SECRET"]}, ""},
		{"secret_env", config.Webhook{Name: "a", URL: "https://example.com/h", SecretEnv: "HOOK_SECRET"}, ""},
		{"bad name", config.Webhook{Name: "A b", URL: "https://example.com", Secret: plain}, "webhooks[0].name"},
		{"no scheme", config.Webhook{Name: "a", URL: "example.com/h", Secret: plain}, "absolute http or https URL"},
		{"ftp", config.Webhook{Name: "a", URL: "ftp://example.com/h", Secret: plain}, "absolute http or https URL"},
		{"credentials", config.Webhook{Name: "a", URL: "https://u:p@example.com/h", Secret: plain}, "credentials"},
		{"no secret", config.Webhook{Name: "a", URL: "https://example.com"}, "exactly one of secret and secret_env"},
		{"both secrets", config.Webhook{Name: "a", URL: "https://example.com", Secret: plain, SecretEnv: "HOOK_SECRET"}, "exactly one"},
		{"short secret", config.Webhook{Name: "a", URL: "https://example.com", Secret: "short"}, "at least 32 characters"},
		{"short whsec", config.Webhook{Name: "a", URL: "https://example.com", Secret: "whsec_c2hvcnQ="}, "24 to 64 bytes"},
		{"bad whsec", config.Webhook{Name: "a", URL: "https://example.com", Secret: "whsec_!!!"}, "base64"},
		{"unset env", config.Webhook{Name: "a", URL: "https://example.com", SecretEnv: "NOPE"}, "NOPE is empty or unset"},
		{"short env", config.Webhook{Name: "a", URL: "https://example.com", SecretEnv: "SHORT"}, "secret_env SHORT"},
		{"event", config.Webhook{Name: "a", URL: "https://example.com", Secret: plain, Events: []string{"structured_output.done"}}, "unknown event"},
		{"timeout", config.Webhook{Name: "a", URL: "https://example.com", Secret: plain, Timeout: "10ms"}, "timeout"},
		{"retry_for", config.Webhook{Name: "a", URL: "https://example.com", Secret: plain, RetryFor: "forever"}, "retry_for"},
	} {
		eps, err := parse([]config.Webhook{tc.cfg}, getenv, true)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			continue
		}
		if err == nil && (len(eps[0].key) < minKeyBytes || len(eps[0].events) != 3 ||
			eps[0].timeout != DefaultTimeout || eps[0].retryFor != DefaultRetryFor) {
			t.Errorf("%s: defaults %+v", tc.name, eps[0])
		}
	}
	if _, err := parse([]config.Webhook{{Name: "a", URL: "https://x", Secret: plain}, {Name: "a", URL: "https://y", Secret: plain}}, getenv, true); err == nil ||
		!strings.Contains(err.Error(), "defined twice") {
		t.Errorf("duplicate names: %v", err)
	}
	// Check (the config file's) does not read the environment.
	if err := Check([]config.Webhook{{Name: "a", URL: "https://x", SecretEnv: "NOPE"}}); err != nil {
		t.Errorf("Check with secret_env: %v", err)
	}
	eps, err := parse([]config.Webhook{{Name: "a", URL: "https://x", Secret: plain, Events: []string{EventFailed, EventFailed},
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

// A config file's webhooks are checked without the environment, which is
// read at start-up.
func TestCheckConfigFile(t *testing.T) {
	t.Parallel()
	base := `{"providers":[{"name":"p","type":"openai"}],"models":[{"id":"m","provider":"p","model":"gpt-5"}],"webhooks":[%s]}`
	for hook, want := range map[string]string{
		`{"name":"ops","url":"https://hooks.example.com/chatd","secret_env":"OPS_HOOK_SECRET","events":["structured_output.failed"]}`: "",
		`{"name":"ops","url":"javascript:alert(1)","secret_env":"S"}`:                                                                 "absolute http or https URL",
		`{"name":"ops","url":"https://x","secret":"too short"}`:                                                                       "at least 32 characters",
		`{"name":"ops","url":"https://x","secret_env":"S","sekret":"x"}`:                                                              "unknown field",
	} {
		cfg, err := config.Parse([]byte(strings.Replace(base, "%s", hook, 1)))
		if err == nil {
			err = Check(cfg.Webhooks)
		}
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", hook, err, want)
		}
	}
}
