// Package pytest holds the tests that need Python: the Python SDK
// (sdk/python) under pytest against a live chatd, the drift check of its
// generated models, and its wheel and sdist installed into empty virtual
// environments of every supported interpreter found, where the examples
// run against chatd and a real mockllm and type-check under pyright
// --strict. The tools come from PyPI, pinned by
// sdk/python/requirements-dev.txt, into sdk/python/.venv (make py-deps
// makes the same one). Test code only: the tests are in the _test files.
package pytest
