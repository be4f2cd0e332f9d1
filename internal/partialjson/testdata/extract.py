#!/usr/bin/env python3
"""Regenerates streams.json: the argument (and JSON answer) fragments of real
provider streams, as recorded in fantasy v0.41.2's provider tests
(charm.land/fantasy/providertests/testdata, Apache-2.0). Only the fragment
texts are kept, in the order the provider sent them.

    python3 extract.py "$(go env GOMODCACHE)/charm.land/fantasy@v0.41.2/providertests/testdata" > streams.json
"""
import json, os, sys
import yaml

def events(body):
    for line in body.splitlines():
        if line.startswith("data: "):
            try:
                yield json.loads(line[6:])
            except ValueError:
                pass

def streams(body):
    out = {}
    def add(key, frag):
        if frag:
            out.setdefault(key, []).append(frag)
    for e in events(body):
        t = e.get("type", "")
        if t == "content_block_delta" and e["delta"].get("type") == "input_json_delta":
            add(("anthropic", e["index"]), e["delta"]["partial_json"])
        elif t == "response.function_call_arguments.delta":
            add(("responses", e.get("item_id")), e["delta"])
        elif t == "response.output_text.delta":
            add(("responses-text", e.get("item_id")), e["delta"])
        for c in e.get("choices") or []:
            d = c.get("delta") or {}
            for tc in d.get("tool_calls") or []:
                add(("chat", c.get("index", 0), tc.get("index", 0)), (tc.get("function") or {}).get("arguments"))
            if isinstance(d.get("content"), str):
                add(("chat-text", c.get("index", 0)), d["content"])
    return out

result = []
root = sys.argv[1]
for dirpath, _, files in sorted(os.walk(root)):
    for f in sorted(files):
        if not f.endswith("streaming.yaml"):
            continue
        path = os.path.join(dirpath, f)
        doc = yaml.safe_load(open(path))
        for i, it in enumerate(doc.get("interactions") or []):
            body = ((it.get("response") or {}).get("body")) or ""
            if isinstance(body, bytes):
                try:
                    body = body.decode("utf-8")
                except UnicodeDecodeError:
                    continue  # a binary event stream (Bedrock)
            for key, frags in streams(body).items():
                text = "".join(frags)
                try:
                    v = json.loads(text)
                except ValueError:
                    continue
                if len(frags) < 2 or not isinstance(v, (dict, list)):
                    continue
                result.append({"source": "%s#%d/%s" % (os.path.relpath(path, root), i, key[0]), "fragments": frags})
json.dump(result, sys.stdout, indent=1, ensure_ascii=False)
print()
