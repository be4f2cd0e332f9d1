package runner

import (
	"fmt"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// MaxRejections fails a structured request on its third rejected
// finalization batch: the first try plus two repairs.
const MaxRejections = 3

// reject counts one rejected finalization batch of req into p (validation:
// the schema rejected a value) and, when that spends the budget, returns
// the failure that ends the request; why says what the last batch did
// wrong. This is the one place the budget is decided: text-only endings,
// invalid arguments, values and batches all come here.
func reject(req *store.Request, p *store.Progress, validation bool, why string) *store.Outcome {
	p.Rejections++
	if validation {
		p.ValidationRejections++
	}
	if req.Rejections+p.Rejections < MaxRejections {
		return nil
	}
	return &store.Outcome{RequestID: req.RequestID, Status: client.OutputFailed,
		Code:    exhaustedCode(req.ValidationRejections + p.ValidationRejections),
		Message: fmt.Sprintf("no valid result after %d attempts: %s", MaxRejections, why)}
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
