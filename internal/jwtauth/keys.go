package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// keyFor finds the key of t's kid: from the keys fetched, or, for a kid
// not among them, from a fetch (at most one per MinRefresh; requests that
// arrive while one is under way wait for it instead of starting another).
func (v *Verifier) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	kid, ok := t.Header["kid"].(string)
	if !ok || kid == "" {
		return nil, refuse("the token names no key (kid)")
	}
	k, found, wait := v.lookup(kid)
	if !found && wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		k, found, _ = v.lookup(kid)
	}
	if !found {
		return nil, refuse("the token's key is not among the identity provider's keys")
	}
	if k.alg != "" && k.alg != t.Method.Alg() {
		return nil, refuse("the token's algorithm is not its key's")
	}
	return k.pub, nil
}

// lookup returns kid's key, or the channel of a fetch to wait for: one
// under way, or one it starts when MinRefresh has passed since the last
// fetch an unknown kid caused (nil: none may start).
func (v *Verifier) lookup(kid string) (key, bool, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, true, nil
	}
	if v.inflight != nil {
		return key{}, false, v.inflight
	}
	now := v.o.Now()
	if !v.lastKID.IsZero() && now.Sub(v.lastKID) < v.o.MinRefresh {
		return key{}, false, nil
	}
	v.lastKID = now
	done := make(chan struct{})
	v.inflight = done
	go func() {
		// Not the request's context: the fetch serves every request
		// waiting on it, whichever leaves first.
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		defer cancel()
		if err := v.fetch(ctx); err != nil {
			v.o.Logger.Warn("jwt: fetching the identity provider's keys for an unknown key id failed", "error", err.Error())
		}
		v.mu.Lock()
		v.inflight = nil
		v.mu.Unlock()
		close(done)
	}()
	return key{}, false, done
}

// refresh is a scheduled fetch; it waits for one under way instead.
func (v *Verifier) refresh(ctx context.Context) error {
	v.mu.Lock()
	if wait := v.inflight; wait != nil {
		v.mu.Unlock()
		<-wait
		return nil
	}
	done := make(chan struct{})
	v.inflight = done
	v.mu.Unlock()
	err := v.fetch(ctx)
	v.mu.Lock()
	v.inflight = nil
	v.mu.Unlock()
	close(done)
	return err
}

// fetch reads the keys (after the discovery document, while its jwks_uri
// is not known) and replaces the keys held; on failure they stay.
func (v *Verifier) fetch(ctx context.Context) error {
	v.mu.Lock()
	v.fetches++
	url := v.jwksURL
	v.mu.Unlock()
	if url == "" {
		var err error
		if url, err = v.discover(ctx); err != nil {
			return err
		}
	}
	var set jwkset.JWKSMarshal
	if err := v.getJSON(ctx, url, &set); err != nil {
		return err
	}
	keys := map[string]key{}
	for _, m := range set.Keys {
		if m.KID == "" || m.USE != "" && m.USE != jwkset.UseSig {
			continue // a token names its key; encryption keys do not verify
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue // a key type this package does not use (HS*, say)
		}
		keys[m.KID] = key{alg: string(m.ALG), pub: jwk.Key()}
	}
	if len(keys) == 0 {
		return fmt.Errorf("the JWKS at %s holds no signing key", url)
	}
	v.mu.Lock()
	v.keys = keys
	v.mu.Unlock()
	return nil
}

// discover reads the issuer's OpenID discovery document: its issuer must
// be the one configured, exactly (OpenID Connect Discovery 1.0 §4.3).
func (v *Verifier) discover(ctx context.Context) (string, error) {
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	url := strings.TrimSuffix(v.o.Issuer, "/") + "/.well-known/openid-configuration"
	if err := v.getJSON(ctx, url, &doc); err != nil {
		return "", err
	}
	if doc.Issuer != v.o.Issuer {
		return "", fmt.Errorf("the discovery document at %s names the issuer %q, not %q", url, doc.Issuer, v.o.Issuer)
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("the discovery document at %s has no jwks_uri", url)
	}
	v.mu.Lock()
	v.jwksURL = doc.JWKSURI
	v.mu.Unlock()
	return doc.JWKSURI, nil
}

// getJSON decodes a JSON document of at most maxDocumentBytes.
func (v *Verifier) getJSON(ctx context.Context, url string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.o.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxDocumentBytes {
		return fmt.Errorf("GET %s: larger than %d bytes", url, maxDocumentBytes)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return errors.Join(fmt.Errorf("GET %s: not the JSON expected", url), err)
	}
	return nil
}
