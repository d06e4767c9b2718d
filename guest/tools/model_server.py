#!/usr/bin/env python3
"""A local model server for tests and `agt verify`: it speaks the four APIs the coding agents
use, streaming as the real services stream, deterministically.

  POST .../v1/messages                      Anthropic Messages (claude), SSE or JSON
  POST .../v1/responses                     OpenAI Responses (codex), SSE
  POST .../v1/chat/completions              OpenAI chat completions (opencode, pi), SSE or JSON
  POST .../models/M:generateContent         Gemini, JSON (gemini's router and checks)
  POST .../models/M:streamGenerateContent   Gemini, SSE with ?alt=sse
  POST .../models/M:countTokens, .../v1/messages/count_tokens   token counts
  GET  .../models                           a one-model list

The "model" follows one script, the same for every API:
  - a request that asks for JSON by a schema (gemini's router, next-speaker check) gets an
    object filled from the schema (an enum's first value, numbers 1);
  - a request with no tools (titles, summaries) gets a short text;
  - a request whose last message is a tool's result gets "done: tool ran";
  - otherwise one tool call that writes a file, with the agent's own tool: the first of
    Write, write_file, write (its path argument named as its schema names it: file_path,
    filePath or path), else a shell tool (exec_command, shell, bash) running printf.
    A prompt containing "AGT-WRITE <file> <word>" writes <word> into <file>; any other
    prompt writes hi-from-tool into out.txt.

usage: model_server.py [--host H] [--port P] [--log FILE]
Prints "listening on H:P" on stdout once it accepts connections.
"""
import argparse
import json
import re
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

LOG = None
MODEL = "mock"
WRITE_TOOLS = ("Write", "write_file", "write")
SHELL_TOOLS = ("exec_command", "shell", "bash")


def log(msg):
    if LOG:
        with open(LOG, "a") as f:
            f.write(msg + "\n")


def writes(prompt):
    """The files the tool call writes: [(path, word)]."""
    m = re.search(r"AGT-WRITE ([A-Za-z0-9._/-]+) ([A-Za-z0-9._-]+)", prompt)
    return [(m.group(1), m.group(2))] if m else [("out.txt", "hi-from-tool")]


def schema_value(s):
    """A value that fits a JSON schema (OpenAPI-style upper-case types too)."""
    s = s or {}
    t = s.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    t = (t or ("object" if "properties" in s else "string")).lower()
    if "enum" in s and s["enum"]:
        return s["enum"][0]
    if t == "object":
        return {k: schema_value(v) for k, v in (s.get("properties") or {}).items()}
    if t == "array":
        return []
    if t in ("number", "integer"):
        return 1
    if t == "boolean":
        return False
    return "simple"


def tool_call(tools, prompt):
    """(name, args) of the one tool call that writes the prompt's files; tools: {name: schema}."""
    ws = writes(prompt)
    if len(ws) == 1:
        for name in WRITE_TOOLS:
            props = (tools.get(name) or {}).get("properties") or {}
            key = next((k for k in ("file_path", "filePath", "path") if k in props), None)
            if key and "content" in props:
                return name, {key: ws[0][0], "content": ws[0][1]}
    cmd = "; ".join(f"printf %s {word} > {path}" for path, word in ws)
    for name in SHELL_TOOLS:
        if name not in tools:
            continue
        props = tools[name].get("properties") or {}
        if "cmd" in props:
            return name, {"cmd": cmd}
        args = {"command": ["sh", "-c", cmd] if (props.get("command") or {}).get("type") == "array" else cmd}
        if "description" in props:
            args["description"] = "write a file"
        return name, args
    return None, None


def plan(tools, after_tool, prompt, json_schema=None):
    """What the model answers: {"json": obj} | {"text": s} | {"tool": (name, args)}."""
    if json_schema is not None:
        return {"json": schema_value(json_schema)}
    if not tools:
        return {"text": "agt test"}
    if after_tool:
        return {"text": "done: tool ran"}
    name, args = tool_call(tools, prompt)
    if name is None:
        return {"text": "no tool to write with"}
    return {"tool": (name, args)}


def text_of(x):
    """Every string in a request's messages, joined (the prompt is found in it)."""
    if isinstance(x, str):
        return x
    if isinstance(x, list):
        return " ".join(text_of(v) for v in x)
    if isinstance(x, dict):
        return " ".join(text_of(v) for k, v in x.items() if k in ("content", "text", "parts", "input"))
    return ""


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


USAGE_OPENAI = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


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

    def start_sse(self):
        """A stream of events in HTTP/1.1 chunks, as the real services send them."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_sse(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def event(self, name, obj, sep=b"\n\n"):
        """One SSE event, flushed at once."""
        head = f"event: {name}\n".encode() if name else b""
        self.chunk(head + b"data: " + json.dumps(obj).encode() + sep)

    def do_GET(self):
        path = urlsplit(self.path).path.rstrip("/")
        if path.endswith("/models"):
            self.reply_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                              "owned_by": "agt"}],
                                  "models": [{"name": "models/" + MODEL, "displayName": MODEL}]})
        else:
            self.reply_json(200, {"ok": True})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            self.reply_json(400, {"error": {"message": "bad json"}})
            return
        u = urlsplit(self.path)
        path = u.path.rstrip("/")
        if path.endswith("/chat/completions"):
            self.chat(body)
        elif path.endswith("/messages/count_tokens"):
            self.reply_json(200, {"input_tokens": 1})
        elif path.endswith("/messages"):
            self.anthropic(body)
        elif path.endswith("/responses"):
            self.openai_responses(body)
        elif path.endswith(":countTokens"):
            self.reply_json(200, {"totalTokens": 1})
        elif path.endswith(":streamGenerateContent"):
            self.gemini(body, stream=True)
        elif path.endswith(":generateContent"):
            self.gemini(body, stream=False)
        else:
            self.reply_json(404, {"error": {"message": "not found: " + path}})

    def logged(self, api, body, p):
        log(json.dumps({"api": api, "tools": body.get("_ntools", 0),
                        "answer": next(iter(p)), "tool": p["tool"][0] if "tool" in p else None}))

    # --- OpenAI chat completions (opencode, pi)
    def chat(self, body):
        messages = body.get("messages") or []
        tools = {t["function"]["name"]: t["function"].get("parameters") or {}
                 for t in body.get("tools") or [] if t.get("type") == "function"}
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None
        after = bool(messages) and messages[-1].get("role") == "tool"
        prompt = text_of([m for m in messages if m.get("role") == "user"])
        p = plan(tools, after, prompt, schema)
        body["_ntools"] = len(tools)
        self.logged("chat", body, p)
        created = int(time.time())
        cid = new_id("chatcmpl-")
        if "tool" in p:
            name, args = p["tool"]
            call = {"id": new_id("call_"), "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            msg, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            text = json.dumps(p["json"]) if "json" in p else p["text"]
            msg, finish = {"role": "assistant", "content": text}, "stop"
        if not body.get("stream"):
            self.reply_json(200, {"id": cid, "object": "chat.completion", "created": created, "model": body.get("model", MODEL),
                                  "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": USAGE_OPENAI})
            return
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": body.get("model", MODEL)}

        def chunk(delta, finish_reason=None, **extra):
            return dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra)
        self.start_sse()
        self.event(None, chunk({"role": "assistant", "content": ""}))
        if "tool_calls" in msg:
            c = msg["tool_calls"][0]
            self.event(None, chunk({"tool_calls": [{"index": 0, "id": c["id"], "type": "function",
                                                    "function": {"name": c["function"]["name"], "arguments": ""}}]}))
            self.event(None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": c["function"]["arguments"]}}]}))
        else:
            self.event(None, chunk({"content": msg["content"]}))
        self.event(None, chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            self.event(None, dict(base, choices=[], usage=USAGE_OPENAI))
        self.chunk(b"data: [DONE]\n\n")
        self.end_sse()

    # --- Anthropic Messages (claude)
    def anthropic(self, body):
        messages = body.get("messages") or []
        tools = {t["name"]: t.get("input_schema") or {} for t in body.get("tools") or [] if "name" in t}
        last = messages[-1] if messages else {}
        content = last.get("content")
        after = last.get("role") == "user" and isinstance(content, list) and \
            any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        prompt = text_of([m for m in messages if m.get("role") == "user"])
        p = plan(tools, after, prompt)
        body["_ntools"] = len(tools)
        self.logged("anthropic", body, p)
        mid, model = new_id("msg_"), body.get("model", MODEL)
        if "tool" in p:
            name, args = p["tool"]
            block, stop = {"type": "tool_use", "id": new_id("toolu_"), "name": name, "input": args}, "tool_use"
        else:
            block, stop = {"type": "text", "text": p["text"]}, "end_turn"
        usage = {"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        msg = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [block],
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self.reply_json(200, msg)
            return
        self.start_sse()
        self.event("message_start", {"type": "message_start", "message": dict(msg, content=[], stop_reason=None)})
        if block["type"] == "tool_use":
            self.event("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": dict(block, input={})})
            self.event("ping", {"type": "ping"})
            self.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        else:
            self.event("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}})
            self.event("ping", {"type": "ping"})
            self.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": block["text"]}})
        self.event("content_block_stop", {"type": "content_block_stop", "index": 0})
        self.event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 1}})
        self.event("message_stop", {"type": "message_stop"})
        self.end_sse()

    # --- OpenAI Responses (codex)
    def openai_responses(self, body):
        items = body.get("input") or []
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        tools = {t["name"]: t.get("parameters") or {} for t in body.get("tools") or []
                 if t.get("type") == "function" and "name" in t}
        after = bool(items) and isinstance(items[-1], dict) and \
            items[-1].get("type") in ("function_call_output", "custom_tool_call_output")
        prompt = text_of([i for i in items if isinstance(i, dict) and i.get("role") == "user"])
        fmt = ((body.get("text") or {}).get("format") or {})
        p = plan(tools, after, prompt, fmt.get("schema") if fmt.get("type") == "json_schema" else None)
        body["_ntools"] = len(tools)
        self.logged("responses", body, p)
        rid, created = new_id("resp_"), int(time.time())
        if "tool" in p:
            name, args = p["tool"]
            item = {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
        else:
            text = json.dumps(p["json"]) if "json" in p else p["text"]
            item = {"type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        resp = {"id": rid, "object": "response", "created_at": created, "status": "in_progress",
                "model": body.get("model", MODEL), "output": [], "usage": None}
        usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
        seq = iter(range(1 << 30))

        def ev(name, **kw):
            self.event(name, dict(type=name, sequence_number=next(seq), **kw))
        self.start_sse()
        ev("response.created", response=resp)
        ev("response.in_progress", response=resp)
        if item["type"] == "function_call":
            ev("response.output_item.added", output_index=0, item=dict(item, arguments="", status="in_progress"))
            ev("response.function_call_arguments.delta", item_id=item["id"], output_index=0, delta=item["arguments"])
            ev("response.function_call_arguments.done", item_id=item["id"], output_index=0, arguments=item["arguments"])
        else:
            text = item["content"][0]["text"]
            ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress", content=[]))
            ev("response.content_part.added", item_id=item["id"], output_index=0, content_index=0,
               part={"type": "output_text", "text": "", "annotations": []})
            ev("response.output_text.delta", item_id=item["id"], output_index=0, content_index=0, delta=text)
            ev("response.output_text.done", item_id=item["id"], output_index=0, content_index=0, text=text)
            ev("response.content_part.done", item_id=item["id"], output_index=0, content_index=0,
               part=item["content"][0])
        ev("response.output_item.done", output_index=0, item=item)
        ev("response.completed", response=dict(resp, status="completed", output=[item], usage=usage))
        self.end_sse()

    # --- Gemini generateContent / streamGenerateContent (gemini)
    def gemini(self, body, stream):
        contents = body.get("contents") or []
        tools = {}
        for t in body.get("tools") or []:
            for d in t.get("functionDeclarations") or []:
                tools[d["name"]] = d.get("parametersJsonSchema") or d.get("parameters") or {}
        last = contents[-1] if contents else {}
        after = any("functionResponse" in p for p in last.get("parts") or [] if isinstance(p, dict))
        prompt = text_of([c for c in contents if c.get("role") == "user"])
        gc = body.get("generationConfig") or {}
        schema = gc.get("responseJsonSchema") or gc.get("responseSchema")
        if schema is None and gc.get("responseMimeType") == "application/json":
            schema = {}
        p = plan(tools, after, prompt, schema)
        body["_ntools"] = len(tools)
        self.logged("gemini-stream" if stream else "gemini", body, p)
        if "tool" in p:
            name, args = p["tool"]
            part = {"functionCall": {"name": name, "args": args}}
        else:
            part = {"text": json.dumps(p["json"]) if "json" in p else p["text"]}
        reply = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
                 "modelVersion": MODEL, "responseId": new_id("")}
        if not stream:
            self.reply_json(200, reply)
            return
        self.start_sse()
        self.event(None, reply, sep=b"\r\n\r\n")
        self.end_sse()


def main():
    global LOG
    ap = argparse.ArgumentParser(
        description="A test model server: the Anthropic, OpenAI (Responses and chat "
        "completions) and Gemini APIs, streaming, with a fixed script (the tool call of "
        "\"AGT-WRITE FILE WORD\" in the prompt). Prints \"listening on HOST:PORT\" once it "
        "accepts connections.")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    ap.add_argument("--port", type=int, default=8080, help="port to listen on (8080; 0: any free one)")
    ap.add_argument("--log", metavar="FILE", help="append what each request asked and got to FILE")
    a = ap.parse_args()
    LOG = a.log
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    print(f"listening on {a.host}:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
