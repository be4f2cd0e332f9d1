// Package jstest holds the tests that need node and npm: the OpenAPI
// document under an independent linter (@redocly/cli) and an independent
// client generator (openapi-typescript + openapi-fetch, type-checked
// strictly), the TypeScript SDK's drift check and its tests against a live
// chatd, and the browser test (headless chromium). Test code only: the
// tests are in the _test files.
package jstest
