// Command oidcprovider runs zitadel/oidc's example OpenID provider on a
// loopback port, for chatd's identity tests (internal/oidctest): a real
// provider with discovery, a login form, the authorization code flow and
// RS256 ID tokens. It is a module of its own so that the provider's
// dependencies stay out of chatd's go.mod.
//
// It prints its issuer URL on the first line of standard output once it
// serves. Its users are the example's (test-user@127.0.0.1 and test-user2,
// password verysecure); its one client is chatd-web (secret "secret",
// redirect URIs from -redirect). POST /test/rotate makes a new signing
// key: tokens are signed with it from then on, and the JWKS publishes it
// beside the old ones, as a provider rotating its keys does.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

func main() {
	redirect := flag.String("redirect", "http://127.0.0.1/callback", "comma-separated redirect URIs of the chatd-web client")
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	issuer := fmt.Sprintf("http://127.0.0.1:%d/", ln.Addr().(*net.TCPAddr).Port)
	storage.RegisterClients(storage.WebClient("chatd-web", "secret", strings.Split(*redirect, ",")...))
	st := &rotating{Storage: storage.NewStorage(storage.NewUserStore(issuer))}
	if err := st.rotate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /test/rotate", func(w http.ResponseWriter, r *http.Request) {
		if err := st.rotate(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, st.current().id)
	})
	mux.Handle("/", exampleop.SetupServer(issuer, st, logger, false))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println(issuer)
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// rotating is the example's storage with signing keys that rotate.
type rotating struct {
	*storage.Storage
	mu   sync.Mutex
	keys []*signingKey // the last signs; all are published
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func (s *rotating) rotate() error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, &signingKey{id: fmt.Sprintf("key-%d", len(s.keys)+1), key: k})
	return nil
}

func (s *rotating) current() *signingKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1]
}

func (s *rotating) SigningKey(context.Context) (op.SigningKey, error) { return s.current(), nil }

func (s *rotating) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *rotating) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		keys[i] = publicKey{k}
	}
	return keys, nil
}
