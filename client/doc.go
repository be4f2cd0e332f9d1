// Package client is the Go client of the chatd HTTP API and the home of its
// wire types: every request and response body of the API is a type here, and
// the server's OpenAPI document (GET /api/v1/openapi.json) is derived from
// them. Each route has one method; a non-2xx answer is an *APIError carrying
// the server's Error body.
//
// A structured request, from creation to its committed result:
//
//	c := client.New("http://127.0.0.1:8080", token, nil)
//	res, err := c.CreateChat(ctx, client.CreateChatRequest{
//		Content: []client.MessagePart{client.TextPart("Report the project's test command.")},
//		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{
//			Name:   "project_report",
//			Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
//		}},
//	})
//	if err != nil {
//		var apiErr *client.APIError
//		if errors.As(err, &apiErr) && apiErr.StatusCode == 400 {
//			// apiErr.Body.Validations names the field, e.g. response_format.json_schema.schema
//		}
//		return err
//	}
//	out, err := c.WaitStructuredOutput(ctx, *res.Messages[0].StructuredOutputRequestID)
//	if err != nil {
//		return err
//	}
//	switch out.Status {
//	case client.OutputSucceeded:
//		// out.Value is the validated JSON value (it may be JSON null).
//	case client.OutputFailed, client.OutputCancelled:
//		// out.Error.Code says why: validation_exhausted, interrupted, ...
//	}
//
// While the model writes the value, Partials reads the chat's stream for
// its partial values, typed, from the first whenever it starts before the
// receipt, then the receipt (docs/streams.md):
//
//	for p, err := range client.Partials[Report](c.Stream(ctx, chatID, 0), requestID) {
//		if err != nil {
//			return err
//		}
//		if p.Receipt != nil {
//			// the result: p.Receipt, and p.Value when it succeeded
//		} else {
//			// a preview: p.Value so far (p.Restarted: the model started again)
//		}
//	}
//
// Only a committed receipt is a result: the value of
// StructuredOutputResult or of ChatMessage.StructuredOutput. Tool-call
// arguments and acknowledgements in the chat's history are not.
package client
