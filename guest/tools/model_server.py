#!/usr/bin/env python3
"""A local OpenAI-compatible model server for tests: answers /v1/chat/completions with
streamed (SSE) or plain replies, deterministically.

The "model" follows a script:
  - a request with no tools (opencode's title generation) gets a short text;
  - a request whose last message is a tool result gets "done: tool ran";
  - otherwise it asks for one `bash` tool call.  A prompt containing
    "AGT-WRITE <file> <word>" makes that call write <word> into <file>; any other prompt
    writes hi-from-tool into out.txt.

usage: model_server.py [--host H] [--port P] [--log FILE]
Prints "listening on H:P" on stdout once it accepts connections.
"""
import argparse
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = None


def log(msg):
    if LOG:
        with open(LOG, "a") as f:
            f.write(msg + "\n")


def last_user_text(messages):
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
            return c or ""
    return ""


def writes(prompt):
    """The files the tool call writes: [(path, word)]."""
    m = re.search(r"AGT-WRITE ([A-Za-z0-9._/-]+) ([A-Za-z0-9._-]+)", prompt)
    return [(m.group(1), m.group(2))] if m else [("out.txt", "hi-from-tool")]


def plan(body):
    messages = body.get("messages", [])
    tools = body.get("tools") or []
    if not tools:
        return {"text": "agt test"}
    if messages and messages[-1].get("role") == "tool":
        return {"text": "done: tool ran"}
    cmd = "; ".join(f"printf %s {word} > {path}" for path, word in writes(last_user_text(messages)))
    return {"tool": {"command": cmd, "description": "write a file"}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        log("http " + (fmt % args))

    def reply_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self.reply_json(200, {"object": "list", "data": [{"id": "mock", "object": "model"}]})
        else:
            self.reply_json(200, {"ok": True})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            self.reply_json(400, {"error": {"message": "bad json"}})
            return
        if not self.path.endswith("/chat/completions"):
            self.reply_json(404, {"error": {"message": "not found"}})
            return
        p = plan(body)
        log(json.dumps({"tools": len(body.get("tools") or []), "last": (body.get("messages") or [{}])[-1].get("role"),
                        "answer": "tool" if "tool" in p else "text"}))
        created = int(time.time())
        base = {"id": "chatcmpl-agt", "object": "chat.completion.chunk", "created": created, "model": "mock"}
        if "tool" in p:
            delta = {"role": "assistant", "tool_calls": [{"index": 0, "id": "call_agt_1", "type": "function",
                     "function": {"name": "bash", "arguments": json.dumps(p["tool"])}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": p["text"]}
            finish = "stop"
        if not body.get("stream"):
            msg = {"role": "assistant", "content": delta.get("content")}
            if "tool_calls" in delta:
                msg["tool_calls"] = [dict(tc, index=None) for tc in delta["tool_calls"]]
            self.reply_json(200, {"id": "chatcmpl-agt", "object": "chat.completion", "created": created,
                                  "model": "mock", "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        chunks = [dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
                  dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                       usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})]
        for c in chunks:
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--log")
    a = ap.parse_args()
    LOG = a.log
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    print(f"listening on {a.host}:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
