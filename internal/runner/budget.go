package runner

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/validate"
)

// MaxRejections fails a structured request on its third rejected
// finalization batch: the first try plus two repairs.
const MaxRejections = 3

// reject counts one rejected finalization batch of req into p (validation:
// the schema rejected a value) and, when that spends the budget, returns
// the failure that ends the request. This is the one place the budget is
// decided: text-only endings, invalid arguments, values and batches all
// come here.
//
// kind is the rejection's kind and att what it did wrong, recorded for
// users as the request's next attempt (p.Attempt) and, when the request
// fails, summed up in its message (failedAfter).
func reject(req *store.Request, p *store.Progress, kind string, att attemptErrors) *store.Outcome {
	p.Rejections++
	if kind == rejectValue {
		p.ValidationRejections++
	}
	p.Attempt = att.attempt(int(req.Rejections+p.Rejections), kind)
	if req.Rejections+p.Rejections < MaxRejections {
		return nil
	}
	return &store.Outcome{RequestID: req.RequestID, Status: client.OutputFailed,
		Code:    exhaustedCode(req.ValidationRejections + p.ValidationRejections),
		Message: failedAfter(MaxRejections, att)}
}

// failedAfter words the failure of a request after n rejected attempts for
// the people who read the receipt: how many, and the first thing the last
// one did wrong. The model's feedback says what to do next, and names the
// finalizer tool; users get neither (every attempt's errors are in the
// receipt's error.attempts).
func failedAfter(n int, last attemptErrors) string {
	msg := fmt.Sprintf("%d attempts were rejected", n)
	if len(last.errors) == 0 {
		return msg + "."
	}
	e := last.errors[0]
	what := capText(storable(strings.TrimSuffix(e.Message, ".")), maxAttemptMessageBytes)
	if e.InstancePath != "" {
		what = capText(storable(e.InstancePath), maxAttemptPathBytes) + " " + what
	}
	msg += "; the last: " + what
	if more := max(last.total, len(last.errors)) - 1; more == 1 {
		msg += " (and 1 more error)"
	} else if more > 1 {
		msg += fmt.Sprintf(" (and %d more errors)", more)
	}
	return msg + "."
}

// Caps of what an attempt records (docs/structured-output.md, "Rejected
// attempts"): client.AttemptMaxErrors errors, each path and message cut on
// a character boundary and marked with "…".
const (
	maxAttemptPathBytes    = 1024
	maxAttemptMessageBytes = 512
)

// attemptErrors is what a rejected attempt did wrong, for users: the first
// errors and how many there were in all.
type attemptErrors struct {
	errors []client.AttemptError
	total  int
}

// oneError is an attempt refused for a single reason.
func oneError(path, keyword, message string) attemptErrors {
	return attemptErrors{errors: []client.AttemptError{{InstancePath: path, Keyword: keyword, Message: message}}, total: 1}
}

// valueErrors are a validation's errors.
func valueErrors(res validate.Result) attemptErrors {
	a := attemptErrors{total: res.Total}
	for _, e := range res.Errors {
		a.errors = append(a.errors, client.AttemptError{InstancePath: e.Location, Keyword: e.Keyword, Message: e.Message})
	}
	return a
}

// attempt is the ledger entry: capped, and made storable (jsonb holds
// neither U+0000 nor invalid UTF-8).
func (a attemptErrors) attempt(n int, kind string) *client.Attempt {
	out := &client.Attempt{Attempt: n, Reason: client.AttemptReason(kind), Errors: []client.AttemptError{}, ErrorsTotal: max(a.total, len(a.errors))}
	for _, e := range a.errors[:min(len(a.errors), client.AttemptMaxErrors)] {
		out.Errors = append(out.Errors, client.AttemptError{
			InstancePath: capText(storable(e.InstancePath), maxAttemptPathBytes),
			Keyword:      capText(storable(e.Keyword), maxAttemptMessageBytes),
			Message:      capText(storable(e.Message), maxAttemptMessageBytes),
		})
	}
	out.Truncated = out.ErrorsTotal > len(out.Errors)
	return out
}

// capText cuts s to at most n bytes, "…" included, on a character
// boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// storable replaces what jsonb cannot hold.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// exhaustedCode is the failure of a request that ends without a valid
// value (the budget or the step limit spent): validation_exhausted once the
// schema rejected a value, otherwise not_produced.
func exhaustedCode(validationRejections int32) client.ErrorCode {
	if validationRejections > 0 {
		return client.CodeValidationExhausted
	}
	return client.CodeNotProduced
}
